"""One release of a confusion matrix (or regression measures) serves every derived metric."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dpledger import Ledger, Policy, ReleaseRequest
from dpledger.metrics import flam
from dpledger.published import release_confusion, release_regression

C = 4
POLICY = f"""
name = "flam-test"
version = "1"
neighbouring = "replace"
epoch_epsilon = "{{eps}}"
eval_fraction = "0.25"

[regions]
names = ["all"]

[metrics.confusion]
kind = "vector_sum"
epsilon = "{{per}}"
dimension = {C * C}
cap_per_client = "20"

[metrics.regression]
kind = "vector_sum"
epsilon = "{{per}}"
dimension = 5
cap_per_client = "1"
nonnegative = false
"""


def fleet(seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)  # synthetic data for the test, not release noise
    counts = rng.integers(5, 30, size=2000)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    y = rng.integers(0, C, size=counts.sum())
    pred = np.where(rng.random(y.size) < 0.7, y, rng.integers(0, C, size=y.size))
    return y, pred, offsets


def open_ledger(tmp_path: Path, eps: str, per: str) -> Ledger:
    return Ledger.open(
        tmp_path / "p.db", Policy.from_toml(POLICY.format(eps=eps, per=per)), mode="create"
    )


def test_one_confusion_release_costs_one_epsilon_and_yields_every_metric(tmp_path: Path) -> None:
    y, pred, offsets = fleet()
    rows = flam.confusion_matrix(y, pred, n_classes=C, offsets=offsets, cap=20)
    total = rows.sum(axis=0)
    with open_ledger(tmp_path, eps="4", per="0.5") as ledger:
        req = ReleaseRequest(epoch=0, metric="confusion", region="all", cohort=len(offsets))
        out = release_confusion(ledger, req, total)
        assert len(ledger) == 1
        assert ledger.spent(0, "all") == Fraction(1, 2)
    assert set(out.metrics) == set(flam.CLASSIFICATION_KEYS)
    exact = flam.classification_metrics(total, labels="all")
    for key, value in out.metrics.items():
        iv = out.intervals[key]
        assert iv.low <= value <= iv.high
        # 2,000 clients at ε = 0.5: 95% bars are ~0.01, so 0.05 is ~10 sd (false failure ≪ 1e-6)
        assert abs(value - exact[key]) < 0.05
    assert "clamped" in out.projection
    assert "f1_macro" in out.table()


def test_a_huge_budget_recovers_the_exact_metrics(tmp_path: Path) -> None:
    y, pred, offsets = fleet()
    total = flam.confusion_matrix(y, pred, n_classes=C, offsets=offsets, cap=20).sum(axis=0)
    with open_ledger(tmp_path, eps="4e9", per="1e9") as ledger:
        req = ReleaseRequest(epoch=0, metric="confusion", region="all", cohort=len(offsets))
        out = release_confusion(ledger, req, total)
    exact = flam.classification_metrics(total, labels="all")
    assert out.metrics == pytest.approx(exact, abs=1e-6)


def test_regression_release_derives_r2_mse_rmse_mae_in_one_round(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    n_clients, per = 3000, 20
    y = rng.normal(100, 15, n_clients * per)
    yhat = y + rng.normal(0, 6, y.size)
    offsets = np.arange(n_clients) * per
    kw = {"y_bounds": (40.0, 160.0), "residual_bound": 30.0, "max_samples": 20.0}
    codec = flam.regression_codec(cap=1.0, **kw)  # type: ignore[arg-type]
    measures = flam.regression_measures(y, yhat, offsets=offsets, **kw)  # type: ignore[arg-type]
    encoded = codec.encode(measures).sum(axis=0)
    with open_ledger(tmp_path, eps="4", per="1") as ledger:
        req = ReleaseRequest(epoch=0, metric="regression", region="all", cohort=n_clients)
        out = release_regression(ledger, req, encoded, codec)
    exact = flam.regression_metrics(measures.sum(axis=0))
    assert set(out.metrics) == {"r2", "mse", "rmse", "mae"}
    for key in out.metrics:
        assert out.intervals[key].low <= out.metrics[key] <= out.intervals[key].high
    assert abs(out.metrics["r2"] - exact["r2"]) < 0.1
