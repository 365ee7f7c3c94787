"""Shared plumbing: result rows, sizes, median timing, peak-RSS probes, the table.

Every benchmark figure is a ratio against a baseline run in the same process, because
the machines these run on are shared and noisy: an absolute figure drifts with the
neighbours' load, a same-process ratio much less so. Times are medians over repeats, or
means over loops that time each operation in turn (:func:`in_turn`).
"""

from __future__ import annotations

import gc
import math
import os
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy.typing as npt

__all__ = [
    "FULL",
    "QUICK",
    "FsyncLoop",
    "Row",
    "Sizes",
    "fmt_bytes",
    "fmt_rate",
    "fmt_seconds",
    "fsync_rate",
    "in_turn",
    "log",
    "median_time",
    "peak_rss",
    "read_seconds",
    "render_table",
    "reset_peak_rss",
    "traced_peak",
]

Met = Literal["yes", "NO", "info", "skipped", "error"]


@dataclass(frozen=True, slots=True)
class Sizes:
    """How big each case is; ``FULL`` is the issue's set-up, ``QUICK`` the smoke test's."""

    name: str
    n_clients: int  # fleet for cases 1, 2 and 4
    slice_clients: int  # plain-Python baseline slice of case 1
    repeats: int  # timed repeats of the fast (dpledger) side
    baseline_repeats: int  # timed repeats of the plain-Python loop (case 1)
    central_repeats: int  # timed repeats of scikit-learn on all samples (~50 s each at full)
    releases: int  # SQLite releases per timed repeat (case 3)
    breakdown_iters: int  # iterations per component of the release breakdown
    pg_releases: int  # PostgreSQL releases per writer (case 3; < 1,000, one epoch's budget)
    pg_repeats: int  # alternating repeats of the PostgreSQL rows (each starts processes)
    epochs: int  # epochs of the shipped policy for the lifetime comparison (case 5)
    rounds: int  # rounds of 20 releases per timed repeat (case 3, SQLite and PostgreSQL)


FULL = Sizes("full", 1_000_000, 20_000, 3, 3, 1, 500, 300, 60, 3, 20, 100)
QUICK = Sizes("quick", 10_000, 1_000, 2, 1, 1, 60, 30, 10, 1, 4, 8)


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the table: a measured figure, its same-process baseline, a ratio.

    ``ratio`` is a number and ``ratio_text`` says which way it points (e.g. "38× faster",
    "0.4× raw", "2.1× inputs"); ``met`` is yes/NO against ``target``, or info/skipped.
    """

    case: int
    measured: str
    dpledger: str
    baseline: str
    ratio_text: str
    target: str
    met: Met
    ratio: float | None = None
    values: dict[str, Any] = field(default_factory=dict)  # raw numbers for --json
    note: str = ""
    limit: str = "-"  # the physical limit measured in the same run, e.g. "2.1 k fsync/s"
    limit_ratio: float | None = None  # the dpledger figure as a fraction of that limit

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (non-finite floats become None)."""
        d = asdict(self)
        d["ratio"] = _finite(self.ratio)
        d["limit_ratio"] = _finite(self.limit_ratio)
        d["values"] = {k: _finite(v) for k, v in self.values.items()}
        return d


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def log(msg: str) -> None:
    """Progress to stderr, so stdout carries only the table (or the JSON)."""
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def in_turn(ops: Mapping[str, Callable[[int], object]], n: int) -> dict[str, float]:
    """Mean seconds of each operation over ``n`` loops that run every one once, in turn
    (after one untimed warm-up call each: schemas, WAL files, caches). Shared machines'
    swings in fsync latency and CPU hit all of them alike; means, since a rate is one."""
    for op in ops.values():
        op(0)
    totals = dict.fromkeys(ops, 0.0)
    for i in range(1, n + 1):
        for name, op in ops.items():
            t0 = time.perf_counter()
            op(i)
            totals[name] += time.perf_counter() - t0
    return {k: v / n for k, v in totals.items()}


def median_time(
    fn: Callable[[], object], repeats: int, *, warmup: int = 0
) -> tuple[float, list[float]]:
    """Median wall time of ``fn()`` over ``repeats`` runs (garbage collected before each).

    ``warmup`` untimed runs go first: on these VMs the first touch of fresh memory is
    several times slower than later ones (a 800 MB array: 1.5 s, then 0.15 s).
    """
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(1, repeats)):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def read_seconds(arrays: Sequence[npt.NDArray[Any]], repeats: int) -> float:
    """Median seconds of one numpy sum over each array: the memory-bandwidth limit.

    Any computation that reads these arrays reads at least this much memory, so this is
    the physical floor of array work on them, measured on this machine, in this run.
    """
    t, _ = median_time(lambda: [a.sum() for a in arrays], repeats)
    return t


def traced_peak(fn: Callable[[], object]) -> int:
    """Peak bytes allocated while ``fn()`` runs, by ``tracemalloc`` (numpy reports its
    buffers to it), above what was allocated before: the call's own working memory."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return int(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()


class FsyncLoop:
    """The disk's limit: one 4 KiB write and ``fsync`` per call (what a durable commit needs)."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        self._page = b"\0" * 4096

    def __call__(self, i: int = 0) -> None:
        """Overwrite one page and flush it to the disk."""
        os.pwrite(self._fd, self._page, 0)
        os.fsync(self._fd)

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)


def fsync_rate(directory: Path, n: int) -> float:
    """Mean fsyncs per second of ``n`` 4 KiB write+fsync calls on a file in ``directory``."""
    loop = FsyncLoop(directory / "fsync-limit.bin")
    try:
        loop()  # warm-up: the file's first block
        t0 = time.perf_counter()
        for i in range(n):
            loop(i)
        return n / (time.perf_counter() - t0)
    finally:
        loop.close()


_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux ``clear_refs`` 5); False if unsupported.

    Resetting lets one process measure the peak of each case separately, instead of the
    lifetime maximum that ``getrusage`` reports.
    """
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def peak_rss() -> int:
    """Peak resident set size in bytes since the last reset (``VmHWM``), else lifetime."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def fmt_rate(x: float, unit: str) -> str:
    """``12.3 M samples/s``-style figure."""
    for div, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def fmt_seconds(s: float) -> str:
    """Seconds in the most readable unit (µs, ms or s)."""
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def fmt_bytes(b: float) -> str:
    """Bytes as GiB or MiB."""
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.0f} MiB"


_HEADERS = ("#", "measured", "dpledger", "baseline", "ratio", "limit", "vs limit", "target", "met")


def _vs_limit(r: Row) -> str:
    return "-" if r.limit_ratio is None else f"{r.limit_ratio:.2g}x"


def render_table(rows: Sequence[Row]) -> str:
    """One aligned text table, rows in case order, notes below it.

    ``limit`` is the physical limit of the measured operation, timed in the same run
    (the disk's fsync rate for a durable release, a numpy read pass over the same
    arrays for array work); ``vs limit`` is the dpledger figure as a fraction of it.
    """
    cells = [
        (str(r.case), r.measured, r.dpledger, r.baseline, r.ratio_text, r.limit, _vs_limit(r),
         r.target, r.met)
        for r in rows
    ]  # fmt: skip
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(_HEADERS)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    out = [line(_HEADERS), line(["-" * w for w in widths])]
    out += [line(c) for c in cells]
    notes = [f"  [{r.case}] {r.measured}: {r.note}" for r in rows if r.note]
    if notes:
        out += ["", "notes:", *notes]
    return "\n".join(out)
