"""Case 3: ledger releases per second on SQLite (synchronous=FULL), with a breakdown.

dpledger's figure is ``Ledger.release`` of a 7-bucket histogram, end to end: approval
checks, the budget re-check under ``BEGIN IMMEDIATE``, OpenDP noise, the hash-chained
entry, the spend update and the durable commit. The baseline is the least this ledger
must do per release on the same kind of file: a raw ``sqlite3`` loop sending the
ledger's own transaction (``BEGIN IMMEDIATE``, the entry row a real release wrote, its
spend and head upserts, ``COMMIT``; :mod:`benchmarks._raw_ledger`) with the same schema
and pragmas (WAL, synchronous=FULL). The two, and each stage of the breakdown, are timed
round-robin, one operation each in turn, so the disk's swings in fsync latency hit all
of them alike.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np

from benchmarks._harness import FsyncLoop, Row, Sizes, fmt_rate, fmt_seconds, in_turn, log
from benchmarks._raw_ledger import RawLedgerTxn, captured_rows
from dpledger import mechanisms as mech
from dpledger.accounting import EpochSpend
from dpledger.approval import ReleaseRequest, evaluate
from dpledger.ledger import Ledger
from dpledger.ledger.records import EntryDraft
from dpledger.ledger.sqlite import SqliteStore
from dpledger.policy import Policy
from dpledger.types import Budget

__all__ = [
    "AGGREGATE",
    "BENCH_POLICY",
    "COHORT",
    "PER_EPOCH",
    "bench_policy",
    "request",
    "run",
]

BENCH_POLICY = """
name = "bench-releases"
version = "1"
neighbouring = "replace"
definition = "pure"
epoch_epsilon = "400"          # eps_eval = 100: 1,000 releases of 0.1 per region per epoch
eval_fraction = "0.25"
rounds_per_epoch = 1000        # hist7's allocation: all 1,000 releases of an epoch

[regions]
names = ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"]

[metrics.hist7]
kind = "histogram"
description = "the shipped error histogram's shape: 7 buckets, L1 cap 40"
edges = [0.5, 1.0, 2.0, 5.0, 10.0, 25.0]
edges_version = "abs-error-m/v1"
cap_per_client = "40"
epsilon = "0.1"
"""
PER_EPOCH = 1000
COHORT = 2400
AGGREGATE = tuple(float(x) for x in (9000, 21000, 30500, 21400, 9800, 2900, 1300))


def bench_policy() -> Policy:
    """The release benchmark's policy: one 7-bucket histogram, eight regions."""
    return Policy.from_toml(BENCH_POLICY, source="benchmarks/releases.py")


def request(i: int, region: str = "r0") -> ReleaseRequest:
    """The ``i``-th release of a writer (a new epoch every 1,000, so the budget fits)."""
    return ReleaseRequest(
        epoch=i // PER_EPOCH,
        metric="hist7",
        region=region,
        cohort=COHORT,
        edges_version="abs-error-m/v1",
        policy_version="1",
    )


_APPROVAL = "approval checks (a release's: the shared verdict)"
_DRY_RUN = "approval checks, a dry run (Ledger.check's)"
_BUILD = "OpenDP build (uncached)"
_MAP = "OpenDP map (privacy_loss)"
_NOISE = "OpenDP noise (apply)"
_NOISE_PUBLIC = "OpenDP noise, its public call"
_STORE = "store write txn (commit)"
_RELEASE = "release"
_RAW = "raw"
_RAW_NOISE = "raw + noise"
_FSYNC = "fsync"
_IN_RELEASE_PATH = (_APPROVAL, _NOISE, _STORE)  # build and map are cached in a release


def _facts(policy: Policy) -> mech.MechanismFacts:
    """The mechanism of the benchmark's release (it must be approved)."""
    found = evaluate(policy, request(1), np.asarray(AGGREGATE), EpochSpend.empty())
    if found.prepared is None:
        raise RuntimeError(f"benchmark release refused: {found.verdict.summary()}")
    return found.prepared.facts


def _store_writer(policy: Policy, path: Path, facts: mech.MechanismFacts) -> Callable[[], None]:
    """One bare store write transaction (spend read + chained append), as a release does."""
    store = SqliteStore(path, "create")
    Ledger(store, policy).init()  # creates the schema, as a ledger's first release does
    draft = EntryDraft(
        epoch=0, region="r0", metric="hist7", policy_name=policy.name,
        policy_version=policy.version, policy_hash=policy.content_hash,
        edges_version="abs-error-m/v1", facts=facts,
        charge=Budget(Fraction(1, 10), policy.unit), cohort=COHORT, output=AGGREGATE,
    )  # fmt: skip

    def write() -> None:
        with store.write() as txn:
            txn.load([0], [])
            txn.stage(draft)
            txn.flush()

    return write


def _interleaved(tmp: Path, policy: Policy, n: int) -> dict[str, float]:
    """Mean seconds per operation, with every operation run once per round, in turn.

    This disk's fsync latency swings within seconds (the machines are shared), so the
    release, the raw transaction and each stage are timed round-robin, one after the
    other, rather than in separate blocks: all of them see the same conditions. Means,
    not medians: a rate is a mean, and a durable commit's cost is partly in its tail.
    """
    agg = np.asarray(AGGREGATE)
    facts = _facts(policy)
    entries, spend = captured_rows(policy, lambda ledger: ledger.release(request(0), agg))
    raw = RawLedgerTxn(tmp / "raw.db", policy, entries, spend)
    raw_noised = RawLedgerTxn(tmp / "raw-noised.db", policy, entries, spend)
    disk = FsyncLoop(tmp / "fsync.bin")
    write = _store_writer(policy, tmp / "store.db", facts)

    def floor(i: int) -> None:  # the raw transaction plus the release's own noise call
        mech.apply(facts, agg)
        raw_noised(i)

    ops: dict[str, Callable[[int], object]] = {
        _RAW: raw,
        _RAW_NOISE: floor,
        _FSYNC: disk,
        _STORE: lambda i: write(),
        # a release's path: the request's shared verdict, ledger-state checks deferred to
        # the re-check under the lock (part of the store txn's work in a release)
        _APPROVAL: lambda i: evaluate(policy, request(i), agg, None),
        _DRY_RUN: lambda i: evaluate(policy, request(i), agg, EpochSpend.empty()),
        _NOISE: lambda i: mech.apply(facts, agg),
        # what the same draw costs through Measurement.__call__ (the ledger's call is
        # dpledger._invoke's: the same OpenDP function, fewer conversions)
        _NOISE_PUBLIC: lambda i: mech.build(facts)(agg.tolist()),
    }
    try:
        with Ledger.open(tmp / "ledger.db", policy, mode="create") as ledger:
            ops[_RELEASE] = lambda i: ledger.release(request(i), agg)
            return in_turn(ops, n)
    finally:
        raw.close()
        raw_noised.close()
        disk.close()


def _opendp_uncached(policy: Policy, iters: int) -> dict[str, float]:
    """Mean seconds of an uncached OpenDP build and of the privacy map (CPU only)."""
    facts = _facts(policy)
    build_uncached = mech.build.__wrapped__  # lru_cache keeps the undecorated function
    out = {}
    for name, fn in (
        (_BUILD, lambda: build_uncached(facts)),
        (_MAP, lambda: mech.privacy_loss(facts)),
    ):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        out[name] = (time.perf_counter() - t0) / iters
    return out


def run(sizes: Sizes) -> list[Row]:
    """SQLite releases/s vs the raw loop, and the per-release breakdown rows."""
    policy = bench_policy()
    n = sizes.releases
    log(f"case 3: {n:,} interleaved rounds x {sizes.repeats} repeats on SQLite")
    reps: list[dict[str, float]] = []
    for _ in range(sizes.repeats):
        with tempfile.TemporaryDirectory(prefix="dpledger-bench-") as d:
            reps.append(_interleaved(Path(d), policy, n))
    per_op = {k: float(np.median([r[k] for r in reps])) for k in reps[0]}
    stages = {
        _APPROVAL: per_op[_APPROVAL],
        _DRY_RUN: per_op[_DRY_RUN],
        **_opendp_uncached(policy, sizes.breakdown_iters),
        _NOISE: per_op[_NOISE],
        _NOISE_PUBLIC: per_op[_NOISE_PUBLIC],
        _STORE: per_op[_STORE],
    }
    rates = [1.0 / r[_RELEASE] for r in reps]
    raw_rates = [1.0 / r[_RAW] for r in reps]
    per_release, raw_txn = per_op[_RELEASE], per_op[_RAW]
    rate, raw_rate = 1.0 / per_release, 1.0 / raw_txn
    floor_rate, fsync_rate = 1.0 / per_op[_RAW_NOISE], 1.0 / per_op[_FSYNC]
    ratio = rate / floor_rate
    # the floor had it drawn its noise through OpenDP's public call instead
    public_floor = per_op[_RAW_NOISE] - per_op[_NOISE] + per_op[_NOISE_PUBLIC]
    in_path = sum(stages[k] for k in _IN_RELEASE_PATH)
    rows = [
        Row(
            case=3,
            measured="7-bucket histogram releases, SQLite WAL synchronous=FULL",
            dpledger=fmt_rate(rate, "releases/s"),
            baseline=f"{fmt_rate(floor_rate, 'txn/s')} (raw sqlite3 txn + the same OpenDP noise)",
            ratio_text=f"{ratio:.2f}x floor",
            target=">= 0.8x",
            met="yes" if ratio >= 0.8 else "NO",
            ratio=ratio,
            values={
                "releases_per_s": rate,
                "raw_noised_txn_per_s": floor_rate,
                "raw_txn_per_s": raw_rate,
                "public_call_floor_per_s": 1.0 / public_floor,
                "fsync_per_s": fsync_rate,
                "release_rates": rates,
                "raw_rates": raw_rates,
            },
            limit=fmt_rate(fsync_rate, "fsync/s"),
            limit_ratio=rate / fsync_rate,
            note=f"{n:,} rounds per repeat, median of {len(reps)}; each round times one "
            "release, one raw transaction and each stage, in turn; one release = "
            f"{fmt_seconds(per_release)}, one raw transaction = {fmt_seconds(raw_txn)}; the "
            f"stages a release runs (approval, noise, store txn) sum to {fmt_seconds(in_path)}, "
            "the rest is Ledger.release's own work (spend pre-read, budget re-check, draft, "
            f"Release); {rate / raw_rate:.2f}x the raw transaction without noise; the "
            "floor's noise is the ledger's own OpenDP call (dpledger._invoke); drawn through "
            f"OpenDP's public Measurement call the floor would be {fmt_seconds(public_floor)} "
            f"and this {public_floor / per_release:.2f}x it; the "
            "limit is one fsync per release (a 4 KiB write and fsync on the same disk, "
            "timed in the same rounds)",
        ),
    ]
    for stage, seconds in stages.items():
        rows.append(
            Row(
                case=3,
                measured=f"  per release: {stage}",
                dpledger=fmt_seconds(seconds),
                baseline=f"{fmt_seconds(raw_txn)} raw txn" if stage == _STORE else "-",
                ratio_text=f"{seconds / per_release:.0%} of a release",
                target="-",
                met="info",
                ratio=seconds / per_release,
                values={"seconds": seconds},
                note="build and map are cached by mechanism facts, so a release in steady "
                "state pays neither; shown uncached for their cost"
                if stage == _BUILD
                else "not in a release: the same draw through Measurement.__call__, for "
                "comparison with the ledger's call above"
                if stage == _NOISE_PUBLIC
                else "not in a release: every check with its reason, against the committed "
                "spend, as Ledger.check runs them (a release shares one verdict per request's "
                "public fields and re-checks only the budget, under the lock)"
                if stage == _DRY_RUN
                else "the request's construction (pydantic) included, as in the release row"
                if stage == _APPROVAL
                else "",
            )
        )
    return rows
