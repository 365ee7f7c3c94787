"""Noise calibration: released − true follows Laplace(Δ/ε), drawn by OpenDP.

OpenDP's samplers cannot be seeded, so these tests are random. Each KS test rejects at
p < 1e-9; under the correct distribution p is uniform, so a false failure happens with
probability 1e-9 per assertion (three such assertions: 3e-9 per run; at 1e-5 it was
3e-5, a CI failure in every ~30,000 runs). The power
checks (a wrong scale must be rejected) have a false-failure rate far below that: with
2,100 samples the KS statistic against a 7× scale is ≈ 0.45, p ≈ 1e-300.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from factories import BASE
from scipy import stats

from dpledger import Ledger, Policy, ReleaseRequest

ALPHA = 1e-9


@pytest.fixture
def roomy(tmp_path: Path) -> Ledger:
    text = BASE.format(
        neighbouring="replace", epoch_epsilon="10000", eval_fraction="0.25",
        scalar_eps="0.5", edges20="1.0, 2.0", version="1",
    )  # fmt: skip
    return Ledger.open(tmp_path / "noise.db", Policy.from_toml(text), mode="create")


def test_histogram_noise_is_laplace_at_l1_sensitivity_over_epsilon(roomy: Ledger) -> None:
    true = np.array([30.0, 0.0, 12.5, 7.0, 50.0])
    req = ReleaseRequest(epoch=0, metric="hist5", region="north", cohort=100, edges_version="h5/v1")
    samples = np.concatenate([roomy.release(req, true).noisy_sum - true for _ in range(420)])
    scale = 8 / 0.5  # Δ₁ = 2·cap = 8 under replace; ε = 0.5 for the whole vector
    assert stats.kstest(samples, stats.laplace(scale=scale).cdf).pvalue > ALPHA
    # power: the same data must reject a per-bucket split of ε (5× the scale)
    assert stats.kstest(samples, stats.laplace(scale=5 * scale).cdf).pvalue < ALPHA


def test_scalar_noise_is_laplace_and_the_ci95_covers_95_percent(roomy: Ledger) -> None:
    req = ReleaseRequest(epoch=0, metric="loss_b", region="south", cohort=400)
    true_sum = 123.0
    rels = [roomy.release(req, true_sum) for _ in range(1500)]
    errors = np.array([r.noisy_sum[0] - true_sum for r in rels])
    scale = 4 / 0.25  # clip [-1, 3] → Δ = 4 under replace
    assert stats.kstest(errors, stats.laplace(scale=scale).cdf).pvalue > ALPHA
    inside = np.mean([abs(r.value - true_sum / 400) <= r.error_bar for r in rels])
    # Binomial(1500, 0.95), sd 0.0056: exact tails P(≤ 0.915) = 6e-9 (7.3 sd below; the
    # former 0.92 failed in 5e-7 of runs), P(≥ 0.98) = 1.5e-9 (5.4 sd above)
    assert 0.915 < inside < 0.98
    assert rels[0].error_bar == pytest.approx(math.log(20) * scale / 400)


def test_a_rounds_batched_noise_is_the_same_laplace_per_release(roomy: Ledger) -> None:
    """Noise drawn for a whole round in one OpenDP call per mechanism (``apply_many``):
    every region's release still gets Laplace(Δ/ε) per coordinate, independently."""
    true = np.array([30.0, 0.0, 12.5, 7.0, 50.0])
    regions = ("north", "south", "east")
    items = [
        (ReleaseRequest(epoch=e, metric="hist5", region=r, cohort=100, edges_version="h5/v1"),
         true)
        for e in range(140) for r in regions
    ]  # fmt: skip
    rels = roomy.release_round(items).releases
    errors = np.stack([r.noisy_sum - true for r in rels])  # (420, 5)
    scale = 8 / 0.5
    assert stats.kstest(errors.reshape(-1), stats.laplace(scale=scale).cdf).pvalue > ALPHA
    # independent across regions: the correlation of two regions' noise is ≈ 0 (sd 1/√700)
    by_region = errors.reshape(140, 3, 5)
    corr = np.corrcoef(by_region[:, 0].reshape(-1), by_region[:, 1].reshape(-1))[0, 1]
    assert abs(corr) < 6 / math.sqrt(700)  # > 6 sd: false failure < 1e-8
