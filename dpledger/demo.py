"""The main job: a synthetic fleet evaluated through one epoch of a real ledger.

Simulates a fleet with planted failures (:mod:`dpledger.fleet`), computes every
client's bounded contribution with :mod:`dpledger.metrics`, sums them per region (a
plain sum standing in for secure aggregation), releases the shipped policy's metrics
through a SQLite ledger, and reads the findings off the *released* values only.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np
import numpy.typing as npt

from dpledger.approval import ReleaseRequest, Verdict
from dpledger.errors import InvalidInput, ReleaseRefused
from dpledger.fleet import Fleet, make_fleet
from dpledger.fleet_scenarios import REFERENCE_MODELS
from dpledger.ledger import Ledger, Release
from dpledger.metrics import spatial
from dpledger.metrics.uncertainty import derived_interval
from dpledger.policy import MetricSpec, Policy

__all__ = [
    "DEFAULT_POLICY",
    "DEMO_LABEL",
    "DemoResult",
    "Finding",
    "Progress",
    "claim_ledger",
    "release_epoch",
    "run_demo",
]

DEFAULT_POLICY = Path(__file__).resolve().parent.parent / "policies" / "spatial-eval.toml"
BASELINE_RATIO = REFERENCE_MODELS["baseline"][1] / REFERENCE_MODELS["baseline"][0]
"""Across/along RMSE ratio of the seed's healthy baseline model (1.00 / 0.90 m)."""

DRIFT_FACTOR = 1.5  # a ratio interval above 1.5 × baseline is anisotropic, not noise
TAIL_SHARE = 0.02  # > 2% of errors past the last edge (25 m): a gross-error population
OVERCONFIDENT_GAP = 0.1  # mean(p − y) in the top confidence bucket


class Progress:
    """A one-line progress bar on a stream (stderr), silent when disabled."""

    def __init__(self, steps: int, stream: TextIO | None) -> None:
        self._steps, self._done, self._stream = steps, 0, stream
        self._t0 = time.perf_counter()

    def step(self, label: str) -> None:
        """Advance one step and redraw."""
        self._done += 1
        if self._stream is None:
            return
        width = 30
        filled = width * self._done // self._steps
        bar = "#" * filled + "-" * (width - filled)
        secs = time.perf_counter() - self._t0
        end = "\n" if self._done == self._steps else ""
        self._stream.write(f"\r[{bar}] {self._done}/{self._steps} {label:<42} {secs:5.1f}s{end}")
        self._stream.flush()


@dataclass(frozen=True)
class Finding:
    """A conclusion read off released values, with the evidence a reviewer can check."""

    region: str
    kind: str  # lateral_drift | crs_mismatch | overconfident | refused
    message: str


@dataclass(frozen=True)
class DemoResult:
    """Everything the demo released, refused and concluded."""

    policy: Policy
    ledger_path: str
    n_clients: int
    n_samples: int
    cohorts: dict[str, int]
    releases: tuple[Release, ...]
    refusals: tuple[Verdict, ...]
    findings: tuple[Finding, ...]
    budget: dict[str, tuple[str, str]]  # region -> (spent, remaining), exact
    derived: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    seconds: float = 0.0


def _contributions(fleet: Fleet, policy: Policy) -> dict[str, npt.NDArray[np.float64]]:
    """Per-client contribution rows of each metric, bounded by the policy's clips and caps."""
    m = policy.metrics
    off = fleet.offsets

    def clip_high(spec: MetricSpec) -> float:
        if spec.clip is None:
            raise InvalidInput("a scalar metric without clip")
        return float(spec.clip.high)

    def cap(spec: MetricSpec) -> float:
        return float(spec.cap_per_client or 0)

    rows: dict[str, Callable[[], npt.NDArray[np.float64]]] = {
        "clipped_mean_loss": lambda: spatial.clipped_loss(
            fleet.loss, clip_high=clip_high(m["clipped_mean_loss"]), offsets=off
        ),
        "along_across_ratio": lambda: spatial.along_across_ratio(
            fleet.along, fleet.across, clip=clip_high(m["along_across_ratio"]), offsets=off
        ),
        "error_histogram": lambda: spatial.error_histogram(
            spatial.error_magnitude(fleet.along, fleet.across),
            edges=m["error_histogram"].edges or (),
            cap=cap(m["error_histogram"]),
            offsets=off,
        ),
        "calibration_gap": lambda: spatial.calibration_gap(
            fleet.prob,
            fleet.outcome,
            buckets=m["calibration_gap"].size // 2,
            cap=cap(m["calibration_gap"]),
            offsets=off,
        ),
        "coverage": lambda: spatial.coverage(
            fleet.cell, edges=m["coverage"].edges or (), offsets=off
        ),
    }
    missing = set(rows) - set(m)
    if missing:
        raise InvalidInput(f"the demo needs the spatial metric set; the policy lacks {missing}")
    return {name: fn() for name, fn in rows.items()}


def _region_sums(fleet: Fleet, rows: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
    """Per-region sums of client rows: the stand-in for the secure aggregator."""
    out = {}
    for region in fleet.regions:
        r = fleet.client_range(region)
        # contiguous columns get numpy's pairwise summation: ~1e-15 relative, not ~n·1e-16
        block = np.ascontiguousarray(rows[r.start : r.stop].T)
        out[region] = np.asarray(block.sum(axis=-1), dtype=np.float64)
    return out


def _derive(rel: Release) -> dict[str, float]:
    """Post-processed figures of one release (no further ε), with 95% intervals."""
    name, v = rel.request.metric, rel.noisy_sum
    n = rel.request.cohort
    if name == "error_histogram":
        tail = derived_interval(lambda z: float(z[-1] / max(z.sum(), 1e-9)), v, rel.scale,
                                bounds=(0.0, 1.0))  # fmt: skip
        # a share lies in [0, 1]: clamp the noisy point as its interval is (post-processing)
        share = min(max(float(v[-1] / max(v.sum(), 1e-9)), 0.0), 1.0)
        return {"tail_share": share, "tail_low": tail.low, "tail_high": tail.high}
    if name == "calibration_gap":
        k = v.shape[0] // 2
        gap = derived_interval(lambda z: float(z[k - 1] / max(z[-1], 1e-9)), v, rel.scale)
        return {"top_gap": float(v[k - 1] / max(v[-1], 1e-9)), "top_low": gap.low,
                "top_high": gap.high}  # fmt: skip
    if name == "coverage":
        return {f"share_{i}": float(x) / n for i, x in enumerate(v)}
    return {}


def release_epoch(
    ledger: Ledger,
    sums: dict[str, dict[str, npt.NDArray[np.float64]]],
    cohorts: dict[str, int],
    *,
    epoch: int = 0,
    on_metric: Callable[[str], None] | None = None,
) -> tuple[list[Release], list[Verdict]]:
    """Release every metric of the ledger's policy in every region, once; keep refusals."""
    policy = ledger.policy
    releases: list[Release] = []
    refusals: list[Verdict] = []
    for name, spec in policy.metrics.items():
        for region, total in sums[name].items():
            req = ReleaseRequest(
                epoch=epoch, metric=name, region=region, cohort=cohorts[region],
                edges_version=spec.edges_version, policy_version=policy.version,
            )  # fmt: skip
            try:
                releases.append(ledger.release(req, total))
            except ReleaseRefused as e:
                if e.verdict is None:
                    raise
                refusals.append(e.verdict)
        if on_metric is not None:
            on_metric(f"released {name}")
    return releases, refusals


def _findings(result: DemoResult) -> tuple[Finding, ...]:
    out: list[Finding] = []
    by = {(r.request.region, r.request.metric): r for r in result.releases}
    for region in result.cohorts:
        ratio = by.get((region, "along_across_ratio"))
        tail = result.derived.get((region, "error_histogram"), {})
        gap = result.derived.get((region, "calibration_gap"), {})
        if ratio is not None and tail:
            lo, hi = ratio.interval
            elevated = float(lo) > DRIFT_FACTOR * BASELINE_RATIO
            if tail["tail_low"] > TAIL_SHARE:
                out.append(Finding(region, "crs_mismatch", (
                    f"{tail['tail_share']:.1%} of position errors exceed 25 m (95% interval "
                    f"{tail['tail_low']:.1%}–{tail['tail_high']:.1%}) and the ratio is "
                    f"{float(ratio.value):.2f} ± {ratio.error_bar:.2f}: a subset of devices with a "
                    "wrong coordinate frame (CRS mismatch) — check their projection handling"
                )))  # fmt: skip
            elif elevated:
                out.append(Finding(region, "lateral_drift", (
                    f"across/along ratio {float(ratio.value):.2f} (95% interval {float(lo):.2f}–"
                    f"{float(hi):.2f}) excludes the baseline {BASELINE_RATIO:.2f}: the model "
                    "drifts sideways, which a scalar RMSE would hide"
                )))  # fmt: skip
        if gap and gap["top_low"] > OVERCONFIDENT_GAP:
            out.append(Finding(region, "overconfident", (
                f"top confidence bucket: predicted − observed = {gap['top_gap']:.2f} (95% "
                f"interval {gap['top_low']:.2f}–{gap['top_high']:.2f}): over-confident"
            )))  # fmt: skip
    for v in result.refusals:
        out.append(
            Finding(v.request.region, "refused", f"{v.request.metric}: {v.failures[0].reason}")
        )
    return tuple(out)


DEMO_LABEL = {"purpose": "demo"}
"""The label a demo ledger is created with: the only kind of ledger the demo replaces."""


def claim_ledger(path: Path, *, fresh: bool) -> None:
    """Make ``path`` free for a new demo ledger, or refuse; never touch another file.

    A missing path is free. An existing file is replaced only if it is a ledger the demo
    created (labelled ``purpose = demo``) and ``fresh`` is set; anything else — a real
    ledger, a file that is not a ledger — is refused with :class:`InvalidInput`.
    """
    if str(path).startswith(("postgresql://", "postgres://")):
        raise InvalidInput("the demo writes a local SQLite ledger: give --ledger a file path")
    if not (path.exists() or path.is_symlink()):
        return
    from dpledger.errors import DpLedgerError
    from dpledger.ledger.sqlite import SqliteStore

    try:
        store = SqliteStore(path, "read")
        try:
            purpose = store.meta().get("label.purpose")
        finally:
            store.close()
    except DpLedgerError as e:
        raise InvalidInput(
            f"{path} exists and is not a demo ledger ({e}); the demo never overwrites a file "
            "it did not create: pass --ledger with a new path"
        ) from None
    if purpose != DEMO_LABEL["purpose"]:
        raise InvalidInput(
            f"{path} is a dpledger ledger the demo did not create; the demo never touches "
            "it: pass --ledger with a new path"
        )
    if not fresh:
        raise InvalidInput(
            f"{path} holds a previous demo ledger: pass --fresh to replace it, or --ledger "
            "with a new path"
        )
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def run_demo(
    *,
    n_clients: int = 20_000,
    seed: int = 0,
    ledger_path: str | Path = "dpledger-demo.db",
    policy: Policy | None = None,
    progress: TextIO | None = sys.stderr,
    fresh: bool = False,
) -> DemoResult:
    """Simulate, aggregate, release one epoch per region, and read the findings.

    The ledger at ``ledger_path`` is created by the demo; an existing one is replaced
    only if it is a previous demo ledger and ``fresh`` is set (see :func:`claim_ledger`).
    """
    t0 = time.perf_counter()
    policy = policy or Policy.load(DEFAULT_POLICY)
    path = Path(ledger_path)
    claim_ledger(path, fresh=fresh)
    bar = Progress(4 + len(policy.metrics), progress)
    fleet = make_fleet(n_clients=n_clients, seed=seed, regions=policy.regions.names)
    bar.step(f"fleet: {fleet.n_clients:,} clients, {fleet.n_samples:,} samples")
    contributions = _contributions(fleet, policy)
    bar.step("client contributions (clipped, capped)")
    sums = {name: _region_sums(fleet, rows) for name, rows in contributions.items()}
    cohorts = {r: len(fleet.client_range(r)) for r in fleet.regions}
    bar.step("per-region sums (secure-aggregation stand-in)")
    with Ledger.open(path, policy, mode="create", labels=DEMO_LABEL) as ledger:
        releases, refusals = release_epoch(ledger, sums, cohorts, epoch=0, on_metric=bar.step)
        budget = {r: (str(ledger.spent(0, r)), str(ledger.remaining(0, r))) for r in fleet.regions}
        ok = ledger.verify().ok
    bar.step("ledger verified" if ok else "LEDGER VERIFICATION FAILED")
    derived = {(r.request.region, r.request.metric): _derive(r) for r in releases}
    draft = DemoResult(
        policy=policy, ledger_path=str(path), n_clients=fleet.n_clients,
        n_samples=fleet.n_samples, cohorts=cohorts, releases=tuple(releases),
        refusals=tuple(refusals), findings=(), budget=budget, derived=derived,
    )  # fmt: skip
    return DemoResult(
        **{**draft.__dict__, "findings": _findings(draft), "seconds": time.perf_counter() - t0}
    )


def finite(x: float) -> float | None:
    """``x`` or None when it is not finite (for JSON)."""
    return x if math.isfinite(x) else None
