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
from typing import Any

import numpy as np
import psycopg

from benchmarks._harness import in_turn
from benchmarks.releases import AGGREGATE, PER_EPOCH, request
from benchmarks.rounds import round_items, round_policy
from dpledger import mechanisms as mech
from dpledger.approval import evaluate
from dpledger.ledger import Ledger
from dpledger.policy import Policy

__all__ = [
    "RAW_SCHEMA",
    "ledger_writer",
    "raw_noise_writer",
    "raw_writer",
    "round_interleaved",
]

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


def round_interleaved(
    rounds_url: str, singles_url: str, raw_url: str, n: int, out: Queue[object]
) -> None:
    """Rounds, single releases, a round's noise and a raw round transaction, in turn.

    Each loop times one ``release_round`` (5 metrics x 4 regions), one single release
    (the round policy's histogram in r0), the round's OpenDP noise alone and one raw
    transaction replaying the round's own statements with the rows a real round wrote:
    ``BEGIN``, the advisory lock and the state read in one pipeline, the entries, spend
    and head statement and ``COMMIT`` in another (:mod:`dpledger.ledger.pgwrite`'s two
    round trips). Puts the mean seconds of each, or the error's text.
    """
    from benchmarks.rounds import _item, _noise_of_a_round
    from dpledger.ledger.pgpipe import Pipeline, encode
    from dpledger.ledger.pgwrite import _write_sql
    from dpledger.ledger.postgres import LOCK_KEY, PostgresStore
    from dpledger.ledger.schema import COLUMNS

    try:
        policy = round_policy()
        noise = _noise_of_a_round(policy)
        with Ledger.open(raw_url, policy, mode="create") as capture:
            capture.release_round(round_items(policy, 0))
        with psycopg.connect(raw_url, autocommit=True) as conn:
            entries = conn.execute(f"SELECT {COLUMNS} FROM dpl_entries ORDER BY seq").fetchall()
            spend = conn.execute("SELECT epoch, scope, metric, total FROM dpl_spend").fetchall()
            conn.prepare_threshold = None
            conn.execute("SELECT set_config('synchronous_commit', 'on', false)")
            pipe, enc = Pipeline(), conn.info.encoding
            width, head = len(entries[0]), [len(entries)]
            write_sql = _write_sql(width, len(entries), len(spend))
            lock: list[bytes | None] = [str(LOCK_KEY).encode()]

            def raw(i: int) -> None:
                del i
                base, head[0] = head[0], head[0] + len(entries)
                rows = [(base + k + 1, *r[1:]) for k, r in enumerate(entries)]
                params = [*(x for r in rows for x in r), *(x for r in spend for x in r),
                          str(head[0]), rows[-1][-1]]  # fmt: skip
                pipe.run(conn, [("BEGIN ISOLATION LEVEL READ COMMITTED", []),
                                ("SELECT pg_advisory_xact_lock($1)", lock),
                                (PostgresStore.state_sql, [b"{0}"])])  # fmt: skip
                done = pipe.run(conn, [(write_sql, encode(params, enc)), ("COMMIT", [])])
                if done[-1].command_status != b"COMMIT":
                    raise RuntimeError("the raw round transaction did not commit")

            with (
                Ledger.open(rounds_url, policy, mode="create") as rounds,
                Ledger.open(singles_url, policy, mode="create") as singles,
            ):
                ops: dict[str, Any] = {
                    "round": lambda i: rounds.release_round(round_items(policy, i)),
                    "single": lambda i: singles.release(*_item(policy, i, "hist", "r0")),
                    "noise": noise,
                    "raw": raw,
                }
                out.put(in_turn(ops, n))
    except Exception as e:
        out.put(f"{type(e).__name__}: {e}")
