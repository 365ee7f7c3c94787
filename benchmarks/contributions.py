"""Case 1: client contributions, vectorised batch form vs a plain-Python per-client loop.

dpledger computes the whole spatial set (clipped loss, along/across ratio, error
histogram, calibration gap, coverage) plus a 10-class confusion matrix for every client
of the fleet from the flat arrays with ``offsets=``. The baseline computes the same
contributions client by client in plain Python (:mod:`benchmarks._reference`) on a slice
of the fleet, from per-client lists prepared outside the timed section. Both are
reported as samples/s; before timing, the two are checked to agree on the slice.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks import _reference as ref
from benchmarks._fleet import fleet_nbytes
from benchmarks._harness import (
    Row,
    Sizes,
    fmt_bytes,
    fmt_rate,
    log,
    median_time,
    peak_rss,
    reset_peak_rss,
)
from dpledger.metrics import flam, spatial
from dpledger.policy import Policy
from dpledger.sim.fleet import Fleet

__all__ = ["CONFUSION_CAP", "FleetArrays", "dpledger_contributions", "params", "run"]

CONFUSION_CAP = 40.0
"""L1 cap of a client's confusion matrix (samples), as the error histogram's."""

FleetArrays = dict[str, npt.NDArray[Any]]
_FIELDS = ("loss", "along", "across", "prob", "outcome", "cell", "y_true", "y_pred")


def params(policy: Policy, n_classes: int) -> ref.Params:
    """The contribution bounds of the shipped policy (KeyError if it lacks a metric)."""
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


def dpledger_contributions(
    a: FleetArrays, offsets: npt.NDArray[np.int64], prm: ref.Params
) -> dict[str, npt.NDArray[np.float64]]:
    """Every client's contributions with dpledger's batch functions (``offsets=``)."""
    return {
        "loss": spatial.clipped_loss(a["loss"], clip_high=prm.loss_high, offsets=offsets),
        "ratio": spatial.along_across_ratio(
            a["along"], a["across"], clip=prm.ratio_clip, offsets=offsets
        ),
        "histogram": spatial.error_histogram(
            spatial.error_magnitude(a["along"], a["across"]),
            edges=prm.hist_edges,
            cap=prm.hist_cap,
            offsets=offsets,
        ),
        "calibration": spatial.calibration_gap(
            a["prob"], a["outcome"], buckets=prm.calib_buckets, cap=prm.calib_cap, offsets=offsets
        ),
        "coverage": spatial.coverage(a["cell"], edges=prm.coverage_edges, offsets=offsets),
        "confusion": flam.flatten_confusion(
            flam.confusion_matrix(
                a["y_true"],
                a["y_pred"],
                n_classes=prm.n_classes,
                offsets=offsets,
                cap=prm.confusion_cap,
            )
        ),
    }


def _arrays(fleet: Fleet, n_clients: int) -> tuple[FleetArrays, npt.NDArray[np.int64]]:
    """Views of the first ``n_clients`` clients' samples, and their offsets."""
    offsets = fleet.offsets[:n_clients]
    end = int(fleet.offsets[n_clients]) if n_clients < fleet.n_clients else fleet.n_samples
    return {k: getattr(fleet, k)[:end] for k in _FIELDS}, offsets


def _max_difference(
    ours: dict[str, npt.NDArray[np.float64]], theirs: dict[str, list[object]]
) -> float:
    worst = 0.0
    for name, rows in ours.items():
        other = np.asarray(theirs[name], dtype=np.float64).reshape(rows.shape)
        worst = max(worst, float(np.max(np.abs(rows - other), initial=0.0)))
    return worst


def _baseline(fleet: Fleet, prm: ref.Params, sizes: Sizes) -> tuple[float, int, int, float]:
    """Time the Python loop on the slice: (seconds, clients, samples, max |diff| vs ours)."""
    k = min(sizes.slice_clients, fleet.n_clients)
    sl, sl_off = _arrays(fleet, k)
    n_slice = int(sl["loss"].shape[0])
    clients = ref.split_clients({f: sl[f].tolist() for f in _FIELDS}, sl_off.tolist())
    log(f"case 1: plain-Python loop over {k:,} clients ({n_slice:,} samples)")
    reference: dict[str, list[object]] = {}

    def baseline() -> None:
        reference.update(ref.contributions(clients, prm))

    t_base, _ = median_time(baseline, sizes.baseline_repeats, warmup=1)
    diff = _max_difference(dpledger_contributions(sl, sl_off, prm), reference)
    return t_base, k, n_slice, diff


def run(fleet: Fleet, policy: Policy, sizes: Sizes) -> list[Row]:
    """Time both sides; one samples/s row and one peak-memory row."""
    prm = params(policy, fleet.n_classes)
    t_base, k, n_slice, diff = _baseline(fleet, prm, sizes)
    full, off = _arrays(fleet, fleet.n_clients)
    log(f"case 1: batch contributions over {fleet.n_clients:,} clients ({fleet.n_samples:,})")
    reset_ok = reset_peak_rss()
    t_ours, all_ours = median_time(
        lambda: dpledger_contributions(full, off, prm), sizes.repeats, warmup=1
    )
    peak = peak_rss()
    ours_rate, base_rate = fleet.n_samples / t_ours, n_slice / t_base
    ratio = ours_rate / base_rate
    agree = diff <= 1e-9
    inputs = fleet_nbytes(fleet)
    size = f"{fleet.n_clients:,} clients x {fleet.n_samples / fleet.n_clients:.0f} samples"
    return [
        Row(
            case=1,
            measured=f"contributions: spatial set + 10-class confusion, {size}",
            dpledger=fmt_rate(ours_rate, "samples/s"),
            baseline=f"{fmt_rate(base_rate, 'samples/s')} (Python, {k:,} clients)",
            ratio_text=f"{ratio:.1f}x faster",
            target=">= 30x",
            met=("yes" if ratio >= 30 else "NO") if agree else "error",
            ratio=ratio,
            values={
                "dpledger_samples_per_s": ours_rate,
                "baseline_samples_per_s": base_rate,
                "dpledger_seconds": t_ours,
                "dpledger_all_seconds": all_ours,
                "baseline_seconds": t_base,
                "max_abs_difference_on_slice": diff,
            },
            note=f"median of {sizes.repeats} after a warm-up run, each side; batch and per-client "
            f"loop agree on the slice to {diff:.1e} (max abs diff)"
            + ("" if agree else " -- MISMATCH, ratio not comparable"),
        ),
        Row(
            case=1,
            measured="peak RSS during contributions (fleet arrays resident)",
            dpledger=fmt_bytes(peak),
            baseline=f"{fmt_bytes(inputs)} fleet arrays",
            ratio_text=f"{peak / inputs:.2f}x fleet",
            target="report",
            met="info",
            ratio=peak / inputs,
            values={"peak_rss_bytes": peak, "input_bytes": inputs, "peak_reset": reset_ok},
            note="" if reset_ok else "peak RSS could not be reset: lifetime peak shown",
        ),
    ]
