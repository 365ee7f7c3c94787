"""Case 1: client contributions on the first call on fresh arrays, vs a plain-Python loop.

A server computes each round once, on arrays it has just received: the first call is
the one that counts. So every timed repeat gets FRESH copies of the fleet's per-sample
arrays (made outside the timed section) and times one call on them: no warm-up, no
cache or index carried over from an earlier call (the segment index is built inside
the timed call). Two forms of the same contributions — the spatial set (clipped loss,
along/across ratio, error histogram, calibration gap, coverage) plus a 10-class
confusion matrix capped at 40 samples:

* per-region EXACT sums (:func:`dpledger.metrics.declarations.sum_contributions`): what
  the server needs, equal bit for bit to the fixed-point secure sum of the per-client
  rows, computed block by block without every client's rows;
* per-client rows (:meth:`MetricDeclaration.contribute`, the batch form), what a device
  or a simulator gets.

The baseline computes the per-client rows client by client in plain Python
(:mod:`benchmarks._reference`) on a slice of the fleet, from lists prepared outside the
timed section; the physical limit is one numpy sum over the same input arrays (memory
bandwidth). Before timing, the rows are checked against the Python loop and the sums
against ``exact_sum`` of the rows, on the slice. Peak memory is measured twice on an
extra untimed call: ``tracemalloc`` (numpy reports its buffers to it) and the rise of
the kernel's peak-RSS mark.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks import _reference as ref
from benchmarks._harness import (
    Row,
    Sizes,
    fmt_bytes,
    fmt_rate,
    log,
    median_time,
    peak_rss,
    read_seconds,
    reset_peak_rss,
    traced_peak,
)
from dpledger.metrics.blocks import DEFAULT_WORKERS
from dpledger.metrics.declarations import DECLARATIONS, Bounds, Contribution, sum_contributions
from dpledger.metrics.secure_sum import exact_sum
from dpledger.policy import Policy
from dpledger.sim.demo import DEMO_METRICS, bounds_of
from dpledger.sim.fleet import Fleet

__all__ = [
    "CONFUSION_CAP",
    "FIELDS",
    "WORKERS",
    "client_rows",
    "jobs",
    "params",
    "region_sums",
    "run",
]

WORKERS = DEFAULT_WORKERS
"""Threads of both timed calls (per-region sums and per-client rows): the library's
default (named in each row's note)."""

CONFUSION_CAP = 40.0
"""L1 cap of a client's confusion matrix (samples), as the error histogram's."""

FIELDS = ("loss", "along", "across", "prob", "outcome", "cell", "y_true", "y_pred")
"""The per-sample arrays the contributions read."""

Arrays = dict[str, npt.NDArray[Any]]
_REFERENCE_KEYS = {
    "clipped_mean_loss": "loss",
    "along_across_ratio": "ratio",
    "error_histogram": "histogram",
    "calibration_gap": "calibration",
    "coverage": "coverage",
    "confusion_matrix": "confusion",
}


def params(policy: Policy, n_classes: int) -> ref.Params:
    """The contribution bounds of the shipped policy, for the Python reference."""
    m = policy.metrics

    def high(name: str) -> float:
        clip = m[name].clip
        if clip is None:
            raise KeyError(f"{name} has no clip")
        return float(clip.high)

    return ref.Params(
        loss_high=high("clipped_mean_loss"),
        ratio_clip=high("along_across_ratio"),
        hist_edges=tuple(m["error_histogram"].edges or ()),
        hist_cap=float(m["error_histogram"].cap_per_client or 0),
        calib_buckets=m["calibration_gap"].size // 2,
        calib_cap=float(m["calibration_gap"].cap_per_client or 0),
        coverage_edges=tuple(m["coverage"].edges or ()),
        n_classes=n_classes,
        confusion_cap=CONFUSION_CAP,
    )


def jobs(policy: Policy, n_classes: int) -> dict[str, Contribution]:
    """The shipped policy's metrics (as the demo computes them) plus the capped confusion."""
    out = {
        name: Contribution(DECLARATIONS[declared], bounds_of(policy.metrics[name]))
        for name, declared in DEMO_METRICS.items()
    }
    out["confusion_matrix"] = Contribution(
        DECLARATIONS["confusion_matrix"], Bounds(cap=CONFUSION_CAP), {"n_classes": n_classes}
    )
    return out


def region_sums(
    data: Arrays, offsets: npt.NDArray[np.int64], groups: npt.NDArray[Any], work: Any
) -> dict[str, npt.NDArray[np.float64]]:
    """Per-region exact sums of every contribution (the server's form)."""
    return sum_contributions(work, data, offsets=offsets, groups=groups)


def client_rows(
    data: Arrays, offsets: npt.NDArray[np.int64], work: dict[str, Contribution]
) -> dict[str, npt.NDArray[np.float64]]:
    """Every client's row of every contribution (the batch form), on :data:`WORKERS`
    threads."""
    return {
        name: job.declaration.contribute(
            data, job.bounds, offsets=offsets, workers=WORKERS, **job.settings
        )
        for name, job in work.items()
    }


def _slice(fleet: Fleet, n_clients: int) -> tuple[Arrays, npt.NDArray[np.int64], Any]:
    """Views of the first ``n_clients`` clients' samples, their offsets and regions."""
    end = int(fleet.offsets[n_clients]) if n_clients < fleet.n_clients else fleet.n_samples
    data = {k: getattr(fleet, k)[:end] for k in FIELDS}
    return data, fleet.offsets[:n_clients], fleet.client_region[:n_clients]


def _fresh(fleet: Fleet) -> tuple[Arrays, npt.NDArray[np.int64], Any]:
    """New copies of every array a call reads (untimed): nothing of an earlier call is warm."""
    data = {k: np.array(getattr(fleet, k)) for k in FIELDS}
    return data, np.array(fleet.offsets), np.array(fleet.client_region)


def _cold(
    call: Callable[[Arrays, Any, Any], object], fleet: Fleet, repeats: int
) -> tuple[list[float], list[float]]:
    """Wall seconds of the first call on fresh arrays, once per repeat (fresh copies each
    time), and the process CPU seconds of each call (all threads)."""
    times: list[float] = []
    cpu: list[float] = []
    for _ in range(max(1, repeats)):
        data, off, groups = _fresh(fleet)

        def once(d: Arrays = data, o: Any = off, g: Any = groups) -> None:
            c0 = time.process_time()
            call(d, o, g)
            cpu.append(time.process_time() - c0)

        t, _ = median_time(once, 1)
        times.append(t)
        del data, off, groups
    return times, cpu


def _memory(call: Callable[[Arrays, Any, Any], object], fleet: Fleet) -> dict[str, int]:
    """Working memory of one more call on fresh arrays: tracemalloc peak and RSS rise."""
    data, off, groups = _fresh(fleet)
    inputs = sum(int(a.nbytes) for a in (*data.values(), off, groups))
    traced = traced_peak(lambda: call(data, off, groups))
    reset = reset_peak_rss()
    before = peak_rss()
    call(data, off, groups)
    return {"inputs": inputs, "traced": traced, "rss_rise": peak_rss() - before, "reset": reset}


def _baseline(fleet: Fleet, prm: ref.Params, sizes: Sizes) -> tuple[float, int, dict[str, Any]]:
    """Time the Python loop on the slice: (seconds, samples, its rows by reference key)."""
    k = min(sizes.slice_clients, fleet.n_clients)
    sl, sl_off, _ = _slice(fleet, k)
    n_slice = int(sl["loss"].shape[0])
    clients = ref.split_clients({f: sl[f].tolist() for f in FIELDS}, sl_off.tolist())
    log(f"case 1: plain-Python loop over {k:,} clients ({n_slice:,} samples)")
    reference: dict[str, list[object]] = {}

    def baseline() -> None:
        reference.update(ref.contributions(clients, prm))

    t_base, _ = median_time(baseline, sizes.baseline_repeats, warmup=1)
    return t_base, n_slice, reference


def _agreement(
    fleet: Fleet, work: dict[str, Contribution], reference: dict[str, Any]
) -> dict[str, float]:
    """On the slice: rows vs the Python loop (max |diff|), sums vs exact_sum of the rows."""
    k = len(reference["loss"])
    sl, sl_off, sl_groups = _slice(fleet, k)
    rows = client_rows(sl, sl_off, work)
    rows_diff = max(
        float(np.max(np.abs(r - np.asarray(reference[_REFERENCE_KEYS[name]]).reshape(r.shape))))
        for name, r in rows.items()
    )
    sums = region_sums(sl, sl_off, sl_groups, work)
    sums_diff = 0.0
    for name, job in work.items():
        grid = job.declaration.grid(job.bounds)
        for g in range(sums[name].shape[0]):
            want = exact_sum(rows[name][sl_groups == g], grid)
            sums_diff = max(sums_diff, float(np.max(np.abs(sums[name][g] - want))))
    return {"rows": rows_diff, "sums": sums_diff}


def _rows_for(
    form: str,
    timed: tuple[list[float], list[float]],
    memory: dict[str, int],
    base: tuple[float, int],
    limit_s: float,
    fleet: Fleet,
    agree: bool,
    agreement: str,
    threads: str,
) -> list[Row]:
    """The throughput row and the peak-memory row of one form (``threads``: how it ran)."""
    seconds, cpu = timed
    t = float(np.median(seconds))
    rate, base_rate, limit_rate = fleet.n_samples / t, base[1] / base[0], fleet.n_samples / limit_s
    ratio = rate / base_rate
    inputs, traced = memory["inputs"], memory["traced"]
    mem_ratio = (inputs + traced) / inputs
    size = f"{fleet.n_clients:,} clients x {fleet.n_samples / fleet.n_clients:.0f} samples"
    shown = ", ".join(f"{s:.2f}" for s in seconds)
    shown_cpu = ", ".join(f"{s:.2f}" for s in cpu)
    return [
        Row(
            case=1,
            measured=f"contributions -> {form}, first call on fresh arrays ({size})",
            dpledger=fmt_rate(rate, "samples/s"),
            baseline=f"{fmt_rate(base_rate, 'samples/s')} (Python loop)",
            ratio_text=f"{ratio:.1f}x faster",
            target=">= 30x",
            met=("yes" if ratio >= 30 else "NO") if agree else "error",
            ratio=ratio,
            limit=f"{fmt_rate(limit_rate, 'samples/s')} (numpy sum)",
            limit_ratio=rate / limit_rate,
            values={
                "dpledger_samples_per_s": rate,
                "baseline_samples_per_s": base_rate,
                "limit_samples_per_s": limit_rate,
                "cold_seconds": seconds,
                "cold_cpu_seconds": cpu,
            },
            note=f"spatial set + 10-class confusion capped at {CONFUSION_CAP:g}; {threads}; "
            f"each of {len(seconds)} repeats times ONE call on fresh copies of the input arrays "
            f"(median; seconds {shown}; process CPU seconds {shown_cpu}), the segment index "
            f"built inside it; {agreement}"
            + ("" if agree else " -- MISMATCH, ratio not comparable"),
        ),
        Row(
            case=1,
            measured=f"  peak memory of that call, inputs + working memory ({form})",
            dpledger=fmt_bytes(inputs + traced),
            baseline=f"{fmt_bytes(inputs)} input arrays",
            ratio_text=f"{mem_ratio:.2f}x inputs",
            target="<= 1.5x",
            met="yes" if mem_ratio <= 1.5 else "NO",
            ratio=mem_ratio,
            values={
                "input_bytes": inputs,
                "traced_peak_bytes": traced,
                "rss_rise_bytes": memory["rss_rise"],
                "peak_reset": memory["reset"],
            },
            note=f"working memory = tracemalloc's peak during one untimed call on fresh "
            f"arrays ({fmt_bytes(traced)}); the kernel's peak-RSS mark rose by "
            f"{fmt_bytes(memory['rss_rise'])} in a second call"
            + ("" if memory["reset"] else " (peak RSS could not be reset: lifetime peak)"),
        ),
    ]


def run(fleet: Fleet, policy: Policy, sizes: Sizes) -> list[Row]:
    """Both forms, cold, against the Python loop and the memory-bandwidth limit."""
    prm = params(policy, fleet.n_classes)
    work = jobs(policy, fleet.n_classes)
    t_base, n_slice, reference = _baseline(fleet, prm, sizes)
    diffs = _agreement(fleet, work, reference)
    agree = diffs["rows"] <= 1e-9 and diffs["sums"] == 0.0
    agreement = (
        f"on {len(reference['loss']):,} clients the rows match the Python loop to "
        f"{diffs['rows']:.1e} and the sums equal exact_sum of the rows "
        f"(max |diff| {diffs['sums']:.1e})"
    )
    n_groups = len(fleet.regions)

    def sums(d: Arrays, o: Any, g: Any) -> object:
        return sum_contributions(work, d, offsets=o, groups=g, n_groups=n_groups, workers=WORKERS)

    def rows(d: Arrays, o: Any, g: Any) -> object:
        return client_rows(d, o, work)

    data, _, _ = _fresh(fleet)
    limit_s = read_seconds(list(data.values()), sizes.repeats)
    del data
    out: list[Row] = []
    threads = {
        form: f"blocks on workers={WORKERS} threads (the default; bit-identical {what} for any "
        "count; the Python loop runs on one)"
        for form, what in (("per-region exact sums", "sums"), ("per-client rows", "rows"))
    }
    for form, call in (("per-region exact sums", sums), ("per-client rows", rows)):
        log(f"case 1: {form} over {fleet.n_clients:,} clients ({fleet.n_samples:,} samples)")
        timed = _cold(call, fleet, sizes.repeats)
        memory = _memory(call, fleet)
        out += _rows_for(
            form,
            timed,
            memory,
            (t_base, n_slice),
            limit_s,
            fleet,
            agree,
            agreement,
            threads[form],
        )
    return out
