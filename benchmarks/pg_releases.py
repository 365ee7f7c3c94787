"""Case 3, PostgreSQL rows: releases/s with 1 and 8 concurrent writers vs raw psycopg.

A throwaway server is started with the test suite's helper (``tests/pgserver.py``:
initdb + pg_ctl in a temp dir, ``fsync=on``, as the ``postgres`` user under root).
dpledger's writers call ``Ledger.release`` on a ``postgresql://`` ledger, each in its own
region, from separate processes (as separate hosts would). The baseline writers run a
raw psycopg loop with the same durability (``synchronous_commit=on``) and the same
serialisation (one advisory transaction lock): lock, select the head, insert, commit.
When no server can be started the rows say why instead of failing the run.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks._harness import Row, Sizes, fmt_rate, fmt_seconds, fsync_rate, log
from benchmarks.releases import BENCH_POLICY, bench_policy

__all__ = ["WRITERS", "run"]

WRITERS = (1, 8)
_TESTS = Path(__file__).resolve().parent.parent / "tests"
_TIMEOUT_S = 300.0


def _pgserver() -> ModuleType:
    """The test suite's server helper (tests/ is not a package: imported by path)."""
    if str(_TESTS) not in sys.path:
        sys.path.insert(0, str(_TESTS))
    return importlib.import_module("pgserver")


def _skipped(reason: str) -> list[Row]:
    return [
        Row(
            case=3,
            measured=f"PostgreSQL releases, {w} writer{'s' if w > 1 else ''}",
            dpledger=f"skipped: {reason}",
            baseline="-",
            ratio_text="-",
            target="report",
            met="skipped",
        )
        for w in WRITERS
    ]


def _writers(kind: str, url: str, writers: int, n: int, epoch: int) -> float | str:
    """Aggregate rate of ``writers`` processes doing ``n`` writes each, or an error text."""
    from benchmarks import _pg_workers as workers

    # fork (Linux): children start with dpledger, OpenDP and psycopg already imported, in
    # milliseconds; the parent holds no threads or connections at this point
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    target = {
        "ledger": workers.ledger_writer,
        "raw": workers.raw_writer,
        "raw+noise": workers.raw_noise_writer,
    }[kind]
    barrier = ctx.Barrier(writers)
    out: Any = ctx.Queue()
    procs = [
        ctx.Process(target=target, args=(url, BENCH_POLICY, f"r{w}", n, epoch, barrier, out))
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=_TIMEOUT_S) for _ in procs]
    for p in procs:
        p.join(timeout=_TIMEOUT_S)
    errors = [r for r in results if isinstance(r, str)]
    if errors:
        return errors[0]
    start = min(float(r[0]) for r in results)
    end = max(float(r[1]) for r in results)
    return sum(int(r[2]) for r in results) / (end - start)


def _median(results: list[float | str]) -> float | str:
    """Median rate, or the first error text."""
    errors = [r for r in results if isinstance(r, str)]
    rates = [r for r in results if not isinstance(r, str)]
    return errors[0] if errors else float(statistics.median(rates))


def _prepare(url: str) -> None:
    """Create the ledger schema and the raw table before the writers race."""
    import psycopg

    from benchmarks._pg_workers import RAW_SCHEMA
    from dpledger.ledger import Ledger

    with Ledger.open(url, bench_policy(), mode="create") as ledger:
        ledger.init()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(RAW_SCHEMA)


def _disk_limit(n: int) -> float:
    """The disk's fsync rate (4 KiB write + fsync) on the temp directory the server uses."""
    with tempfile.TemporaryDirectory(prefix="dpledger-bench-") as d:
        return fsync_rate(Path(d), n)


def _row(
    writers: int, n: int, ours: float | str, raw: float | str, floor: float | str, disk: float
) -> Row:
    label = f"PostgreSQL releases, {writers} writer{'s' if writers > 1 else ''} (processes)"
    for result in (ours, raw, floor):
        if isinstance(result, str):
            return Row(3, label, "error", "-", "-", ">= 0.6x raw", "error", note=result)
    assert not isinstance(ours, str)
    assert not isinstance(raw, str)
    assert not isinstance(floor, str)
    return Row(
        case=3,
        measured=label,
        dpledger=fmt_rate(ours, "releases/s"),
        baseline=f"{fmt_rate(raw, 'txn/s')} raw psycopg loop; {fmt_rate(floor, 'txn/s')} with "
        "the same OpenDP noise",
        ratio_text=f"{ours / raw:.2f}x raw, {ours / floor:.2f}x floor",
        target=">= 0.6x raw",
        met="yes" if ours >= 0.6 * raw else "NO",
        ratio=ours / raw,
        values={
            "releases_per_s": ours,
            "raw_txn_per_s": raw,
            "raw_noised_txn_per_s": floor,
            "per_writer": n,
        },
        limit=fmt_rate(disk, "fsync/s"),
        limit_ratio=ours / disk,
        note=f"{n:,} writes per writer; synchronous_commit=on, fsync=on; one advisory lock "
        "serialises writers on both sides; the floor adds the release's OpenDP noise call "
        "to each raw transaction; the limit is the disk's 4 KiB write + fsync rate on the "
        "server's temp filesystem, timed after the writers",
    )


def _interleaved_rounds(server: Any, n: int) -> dict[str, float] | str:
    """Mean seconds of a round, a single release, a round's noise and a raw round txn,
    timed in turn in one forked process (:func:`benchmarks._pg_workers.round_interleaved`)."""
    from benchmarks import _pg_workers as workers

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    out: Any = ctx.Queue()
    urls = [server.create_database() for _ in range(3)]  # rounds, singles, raw: their own
    proc = ctx.Process(target=workers.round_interleaved, args=(*urls, n, out))
    proc.start()
    result: dict[str, float] | str = out.get(timeout=_TIMEOUT_S)
    proc.join(timeout=_TIMEOUT_S)
    return result


def _round_rows(got: dict[str, float] | str, n: int, disk: float) -> list[Row]:
    label = "PostgreSQL round of 5 metrics x 4 regions, 1 writer"
    if isinstance(got, str):
        return [Row(3, label, "error", "-", "-", ">= 10x", "error", note=got)]
    k = 20
    rounds, single = k / got["round"], 1.0 / got["single"]
    ceiling = k * got["single"] / (got["noise"] + got["raw"])
    return [
        Row(
            case=3,
            measured=label,
            dpledger=fmt_rate(rounds, "releases/s"),
            baseline=f"{fmt_rate(single, 'releases/s')} (single releases, 1 writer)",
            ratio_text=f"{rounds / single:.1f}x single",
            target=">= 10x",
            met="yes" if rounds >= 10 * single else "NO",
            ratio=rounds / single,
            values={
                "round_releases_per_s": rounds,
                "single_releases_per_s": single,
                **{f"{k}_s": v for k, v in got.items()},
            },
            limit=f"{fmt_rate(20 * disk, 'releases/s')} (1 fsync/round)",
            limit_ratio=rounds / (20 * disk),
            note=f"{n:,} loops, each timing one round (20 releases, one transaction, one "
            "commit) and one single release of the round policy's histogram, in turn, in one "
            f"process; one round = {fmt_seconds(got['round'])}, one single release = "
            f"{fmt_seconds(got['single'])}; the limit is one fsync per round",
        ),
        Row(
            case=3,
            measured="  ceiling: a round with no ledger time (its noise + a raw txn) vs single",
            dpledger=fmt_seconds(got["noise"] + got["raw"]),
            baseline=f"{fmt_seconds(got['single'])} (one single release)",
            ratio_text=f"{ceiling:.1f}x single",
            target="report",
            met="info",
            ratio=ceiling,
            values={"ceiling": ceiling},
            note=f"{k} x a single release over the round's OpenDP noise "
            f"({fmt_seconds(got['noise'])}) plus a raw psycopg transaction replaying the "
            f"round's own statements and rows in its two round trips ({fmt_seconds(got['raw'])}),"
            " timed in the same loops; a round draws its noise while its first round trip is "
            "under way, so it can come in under this",
        ),
    ]


def run(sizes: Sizes) -> list[Row]:
    """Start a server, measure 1 and 8 writers on both sides, stop the server."""
    try:
        import dpledger.ledger.postgres  # noqa: F401  (the store must exist)

        pgserver = _pgserver()
    except ImportError as e:
        return _skipped(f"PostgreSQL store or psycopg unavailable ({e})")
    log("case 3: starting a throwaway PostgreSQL server")
    try:
        server = pgserver.start()
    except pgserver.PgUnavailable as e:
        return _skipped(str(e).split(";")[0])
    except RuntimeError as e:
        return _skipped(f"server failed to start: {str(e).splitlines()[0]}")
    rows = []
    try:
        url = server.create_database()
        _prepare(url)
        for writers in WRITERS:
            log(f"case 3: PostgreSQL, {writers} writer(s) x {sizes.pg_releases} releases")
            got: dict[str, list[float | str]] = {"raw": [], "raw+noise": [], "ledger": []}
            for rep in range(sizes.pg_repeats):  # alternate, so load drift hits all alike
                epoch = 100 * writers + rep  # a fresh epoch: every repeat has the budget
                for kind, results in got.items():
                    results.append(_writers(kind, url, writers, sizes.pg_releases, epoch))
            ours = _median(got["ledger"])
            disk = _disk_limit(sizes.pg_releases)
            rows.append(
                _row(writers, sizes.pg_releases, ours, _median(got["raw"]),
                     _median(got["raw+noise"]), disk)
            )  # fmt: skip
        log(f"case 3: PostgreSQL rounds, {sizes.rounds} interleaved loops, 1 writer")
        loops = _interleaved_rounds(server, sizes.rounds)
        rows += _round_rows(loops, sizes.rounds, _disk_limit(sizes.pg_releases))
    finally:
        # a fast shutdown still checkpoints (~2 s): let it overlap the next case; the
        # interpreter joins this non-daemon thread before it exits
        threading.Thread(target=server.stop, name="pg-stop", daemon=False).start()
    return rows
