"""Case 5: what composition choices cost in noise and in lifetime ε (no timing).

(a) A 20-bucket histogram is one release: one vector at the histogram's L1 sensitivity
and the full ε. The common mistake releases each bucket on its own at ε/20 (a bucket's
count is a scalar in [0, cap], so Δ = cap under ``replace``). Both are released through
a real ledger at the same total ε; the row compares the published ci95 bars per bucket.

(b) The shipped policy's epochs (every metric in every region, once per epoch) are
released into a ledger, and a client's lifetime loss is read with ``Ledger.lifetime``:
zCDP (summed ρ, converted by OpenDP) and PLD (dp_accounting), against basic
composition (the sum of ε), at the policy's δ.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from benchmarks._harness import Row, Sizes, log
from dpledger.approval import ReleaseRequest
from dpledger.ledger import Ledger
from dpledger.policy import ALL, MetricSpec, Policy
from dpledger.sim.demo import DEFAULT_POLICY

__all__ = ["run"]

_BUCKETS = 20
_COHORT = 10_000
SPLIT_POLICY = f"""
name = "bench-split"
version = "1"
neighbouring = "replace"
epoch_epsilon = "4"
eval_fraction = "0.25"          # eps_eval = 1: either one vector, or 20 buckets at 1/20
allocation = "pooled"           # each way uses the whole epoch: one metric per epoch

[regions]
names = ["all"]

[metrics.hist20]
kind = "histogram"
edges = [{", ".join(str(0.5 * i) for i in range(1, _BUCKETS))}]
edges_version = "h20/v1"
cap_per_client = "1"
epsilon = "1"

[metrics.bucket]
kind = "scalar_mean"
description = "one bucket's count of a client, in [0, cap]: the split-per-bucket mistake"
clip = {{ low = "0", high = "1", source = "cap_per_client of hist20" }}
epsilon = "1/{_BUCKETS}"
"""


def _split_cost() -> Row:
    """Publish the histogram both ways in one ledger; compare per-bucket ci95 bars."""
    policy = Policy.from_toml(SPLIT_POLICY, source="benchmarks/composition.py")
    counts = np.full(_BUCKETS, _COHORT / _BUCKETS)
    with (
        tempfile.TemporaryDirectory(prefix="dpledger-bench-") as d,
        Ledger.open(Path(d) / "split.db", policy, mode="create") as ledger,
    ):
        vec = ledger.release(
            ReleaseRequest(
                epoch=0, metric="hist20", region=ALL, cohort=_COHORT, edges_version="h20/v1"
            ),
            counts,
        )
        split = [
            ledger.release(ReleaseRequest(epoch=1, metric="bucket", region=ALL, cohort=_COHORT), c)
            for c in counts
        ]
        spent_vec, spent_split = ledger.spent(0), ledger.spent(1)
    vec_bar = vec.error_bar / _COHORT  # the histogram publishes sums; per client
    split_bar = split[0].error_bar  # a scalar_mean publishes the mean per client
    ratio = split_bar / vec_bar
    return Row(
        case=5,
        measured=f"ci95 bar per bucket, {_BUCKETS}-bucket histogram, n={_COHORT:,}, eps=1",
        dpledger=f"{vec_bar:.2e} (one vector)",
        baseline=f"{split_bar:.2e} (split, eps/{_BUCKETS} each)",
        ratio_text=f"{ratio:.1f}x smaller bar",
        target="report",
        met="info",
        ratio=ratio,
        values={
            "vector_bar": vec_bar,
            "split_bar": split_bar,
            "vector_epsilon": float(spent_vec),
            "split_epsilon": float(spent_split),
        },
        note=f"both charged eps {spent_vec.text} in total (split: {_BUCKETS} x 1/{_BUCKETS}); "
        f"vector dL1 = 2 cap, a bucket's d = cap; at the histogram's d for each bucket the "
        f"split bar would be {2 * ratio:.0f}x",
    )


def _aggregate(spec: MetricSpec, n: int) -> np.ndarray:
    """A valid per-region sum for ``spec`` (inside its clip or cap bound)."""
    if spec.kind == "scalar_mean":
        clip = spec.clip
        if clip is None:
            raise ValueError("a scalar_mean metric without clip")
        return np.asarray(float(clip.low + clip.high) / 2 * n)
    mass = float(spec.cap_per_client or 0) * n / 2
    return np.full(spec.size, mass / spec.size)


def _lifetime(epochs: int) -> list[Row]:
    """Release ``epochs`` epochs of the shipped policy; lifetime ε by zCDP and PLD vs basic."""
    policy = Policy.load(DEFAULT_POLICY)
    n = 50_000
    with (
        tempfile.TemporaryDirectory(prefix="dpledger-bench-") as d,
        Ledger.open(Path(d) / "lifetime.db", policy, mode="create") as ledger,
    ):
        for epoch in range(epochs):
            for name, spec in policy.metrics.items():
                agg = _aggregate(spec, n)
                for region in policy.regions.names:
                    req = ReleaseRequest(
                        epoch=epoch, metric=name, region=region, cohort=n,
                        edges_version=spec.edges_version, policy_version=policy.version,
                    )  # fmt: skip
                    ledger.release(req, agg)
        region = policy.regions.names[0]
        life = ledger.lifetime(region)
    basic = float(life.epsilon_basic) if life.epsilon_basic is not None else float("nan")
    what = f"lifetime eps, {epochs} epochs x {len(policy.metrics)} metrics ({region} client"
    rows = []
    for method, eps in (("zCDP", life.epsilon_zcdp), ("PLD", life.epsilon_pld)):
        if eps is None:
            rows.append(Row(5, f"{what}, {method})", "skipped: dp_accounting missing", "-", "-",
                            "report", "skipped"))  # fmt: skip
            continue
        rows.append(
            Row(
                case=5,
                measured=f"{what}, {method}, delta={policy.delta:g})",
                dpledger=f"eps {eps:.3g}",
                baseline=f"eps {basic:.3g} (basic composition)",
                ratio_text=f"{basic / eps:.2f}x tighter",
                target="report",
                met="info",
                ratio=basic / eps,
                values={"epsilon": eps, "epsilon_basic": basic, "releases": life.releases},
                note=f"{life.releases} releases touch a client of {region}; rho {life.rho}"
                if method == "zCDP"
                else "",
            )
        )
    return rows


def run(sizes: Sizes) -> list[Row]:
    """Both comparisons."""
    log(f"case 5: composition choices ({sizes.epochs} epochs of the shipped policy)")
    return [_split_cost(), *_lifetime(sizes.epochs)]
