"""Writer processes for the PostgreSQL rows of case 3 (forked from the runner).

Each writer opens its own connection, does one untimed warm-up, waits on a barrier so
that all writers start together, then runs its loop and reports ``(start, end, n)``
on the monotonic clock, which is shared by every process on the machine.
"""

from __future__ import annotations

import hashlib
import json
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

import numpy as np
import psycopg

from benchmarks.releases import AGGREGATE, PER_EPOCH, request
from benchmarks.rounds import round_items, round_policy
from dpledger import mechanisms as mech
from dpledger.approval import evaluate
from dpledger.ledger import Ledger
from dpledger.policy import Policy

__all__ = ["RAW_SCHEMA", "ledger_writer", "raw_noise_writer", "raw_writer", "round_writer"]

RAW_LOCK = int.from_bytes(hashlib.sha256(b"dpledger-bench-raw").digest()[:8], "big", signed=True)
RAW_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS raw_entries (seq BIGSERIAL PRIMARY KEY, epoch BIGINT NOT NULL, "
    "scope TEXT NOT NULL, output TEXT NOT NULL, hash TEXT NOT NULL)"
)


def ledger_writer(
    url: str,
    policy_toml: str,
    region: str,
    n: int,
    epoch: int,
    barrier: Barrier,
    out: Queue[object],
) -> None:
    """``n`` timed ``Ledger.release`` calls in ``region``, all in ``epoch``.

    Puts ``(start, end, n)`` on ``out``, or the error's text.
    """
    first = epoch * PER_EPOCH
    try:
        policy = Policy.from_toml(policy_toml)
        agg = np.asarray(AGGREGATE)
        with Ledger.open(url, policy, mode="create") as ledger:
            ledger.release(request(first, region), agg)
            barrier.wait()
            t0 = time.perf_counter()
            for i in range(first + 1, first + n + 1):
                ledger.release(request(i, region), agg)
            out.put((t0, time.perf_counter(), n))
    except Exception as e:  # reported to the parent, which prints an error row
        barrier.abort()
        out.put(f"{type(e).__name__}: {e}")


def round_writer(
    url: str,
    policy_toml: str,
    region: str,
    n: int,
    epoch: int,
    barrier: Barrier,
    out: Queue[object],
) -> None:
    """``n`` timed ``Ledger.release_round`` calls of 5 metrics x 4 regions.

    Puts ``(start, end, releases)`` on ``out``, or the error's text.
    """
    del policy_toml, region
    try:
        policy = round_policy()
        with Ledger.open(url, policy, mode="create") as ledger:
            first = epoch * 1000
            ledger.release_round(round_items(policy, first))
            barrier.wait()
            t0 = time.perf_counter()
            for i in range(first + 1, first + n + 1):
                ledger.release_round(round_items(policy, i))
            out.put((t0, time.perf_counter(), n * len(round_items(policy, 0))))
    except Exception as e:
        barrier.abort()
        out.put(f"{type(e).__name__}: {e}")


def raw_noise_writer(
    url: str,
    policy_toml: str,
    region: str,
    n: int,
    epoch: int,
    barrier: Barrier,
    out: Queue[object],
) -> None:
    """The raw loop plus the release's own OpenDP noise call: the floor of a noised write."""
    _raw(url, policy_toml, region, n, epoch, barrier, out, noised=True)


def raw_writer(
    url: str,
    policy_toml: str,
    region: str,
    n: int,
    epoch: int,
    barrier: Barrier,
    out: Queue[object],
) -> None:
    """``n`` raw transactions: BEGIN, advisory lock, select head, insert, durable COMMIT."""
    _raw(url, policy_toml, region, n, epoch, barrier, out, noised=False)


def _raw(
    url: str,
    policy_toml: str,
    region: str,
    n: int,
    epoch: int,
    barrier: Barrier,
    out: Queue[object],
    *,
    noised: bool,
) -> None:
    try:
        policy = Policy.from_toml(policy_toml)
        agg = np.asarray(AGGREGATE)
        prepared = evaluate(policy, request(1, region), agg, None).prepared
        if prepared is None:
            raise RuntimeError("benchmark release refused")
        facts = prepared.facts
        output, digest = json.dumps(list(AGGREGATE)), "0" * 64
        with psycopg.connect(url) as conn:
            conn.execute("SET synchronous_commit = on")
            conn.commit()
            barrier.wait()
            t0 = time.perf_counter()
            for _ in range(n):
                if noised:
                    mech.apply(facts, agg)
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (RAW_LOCK,))
                conn.execute("SELECT seq, hash FROM raw_entries ORDER BY seq DESC LIMIT 1")
                conn.execute(
                    "INSERT INTO raw_entries (epoch, scope, output, hash) VALUES (%s, %s, %s, %s)",
                    (epoch, region, output, digest),
                )
                conn.commit()
            out.put((t0, time.perf_counter(), n))
    except Exception as e:
        barrier.abort()
        out.put(f"{type(e).__name__}: {e}")
