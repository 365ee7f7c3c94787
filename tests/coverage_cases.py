"""Release regimes for the coverage acceptance tests (and the research script that quotes them).

Classification: a 10-class confusion matrix with total n, accuracy 0.6 / 0.9 / 0.99
(per-class recall spread ±50% of the error rate, class priors linear from 1.5 to 0.5
relative, errors spread over the other classes by a fixed Dirichlet draw), released with
noise of scale b = 300 (cap 150, ε = 1, replace) at 1%, 10% and 100% of the mean cell
n/C². Regression: measures with R² 0.5 / 0.8 / 0.95 through ``regression_codec``
(y in [40, 160], residual bound 30, 20 samples per client, cap 1, ε = 1: b = 2 on the
encoded vector), at cohorts where the decoded noise scale of Σ(y−ŷ)² is 1%, 10%, 100%
of it, and a 20-client cohort (pure noise). Gaussian noise has the Laplace variance.

Noise here is numpy's, seeded: test-only simulation of many releases (in the product,
release noise comes from OpenDP only).
"""

from __future__ import annotations

import math

import numpy as np

from dpledger.metrics import flam, flam_regression
from dpledger.metrics.uncertainty import Batch, classification_batch, regression_batch

C = 10
SCALE = 300.0
ACCURACIES = (0.6, 0.9, 0.99)
NOISE_OVER_CELL = (0.01, 0.1, 1.0)
CLASSIFICATION_REGIMES = tuple((a, f) for a in ACCURACIES for f in NOISE_OVER_CELL)
REG_CODEC = flam_regression.regression_codec(
    y_bounds=(40.0, 160.0), residual_bound=30.0, max_samples=20.0, cap=1.0
)
REG_SCALE = 2.0
REGRESSION_REGIMES = tuple(
    (r2, label) for r2 in (0.5, 0.8, 0.95) for label in ("1%", "10%", "100%", "20 clients")
)


def true_confusion(accuracy: float, n: float) -> np.ndarray:
    """The regime's true (C, C) matrix: total ``n``, overall accuracy ``accuracy``."""
    prior = np.linspace(1.5, 0.5, C)
    prior /= prior.sum()
    spread = np.linspace(0.5, 1.5, C)
    spread /= (prior * spread).sum()
    recall = 1.0 - (1.0 - accuracy) * spread
    mix = np.random.default_rng(0).dirichlet(np.ones(C - 1), size=C)  # fixed error pattern
    m = np.zeros((C, C))
    for c in range(C):
        m[c, np.arange(C) != c] = (1.0 - recall[c]) * mix[c]
        m[c, c] = recall[c]
    return m * (prior * n)[:, None]


def _noise(rng: np.random.Generator, dist: str, scale: float, shape: tuple[int, ...]) -> np.ndarray:
    if dist == "laplace":
        return rng.laplace(0.0, scale, shape)
    return rng.normal(0.0, math.sqrt(2.0) * scale, shape)


def classification_case(
    accuracy: float, noise_over_cell: float, dist: str, releases: int, seed: int
) -> tuple[dict[str, float], Batch]:
    """Truth and the product's estimates/intervals for ``releases`` noisy releases."""
    n = SCALE * C * C / noise_over_cell
    truth_m = true_confusion(accuracy, n)
    truth = flam.classification_metrics(truth_m, labels="all")
    rng = np.random.default_rng(seed)
    noisy = truth_m.reshape(1, -1) + _noise(rng, dist, SCALE, (releases, C * C))
    sigma = SCALE if dist == "laplace" else math.sqrt(2.0) * SCALE
    batch = classification_batch(
        noisy,
        sigma,
        labels="all",
        distribution=dist,
        max_total=2.0 * n,  # type: ignore[arg-type]
    )
    return truth, batch


def regression_sums(r2: float, n: float) -> np.ndarray:
    """Summed measures of n samples: y − c ~ 3 ± 15, normal residuals giving R² = r2."""
    sd, shift = 15.0, 3.0
    mse = sd * sd * (1.0 - r2)
    mae = math.sqrt(mse) * math.sqrt(2.0 / math.pi)
    return np.array([n * mse, n * mae, n * shift, n * (sd * sd + shift * shift), n])


def regression_n(r2: float, label: str) -> float:
    """Samples n of the regime: decoded noise scale of Σ(y−ŷ)² = label × Σ(y−ŷ)²."""
    if label == "20 clients":
        return 400.0
    b_sse = REG_SCALE * REG_CODEC.decoded_scale(1.0)[0]
    return b_sse / (float(label.rstrip("%")) / 100.0 * 225.0 * (1.0 - r2))


def regression_case(
    r2: float, label: str, dist: str, releases: int, seed: int
) -> tuple[dict[str, float], Batch]:
    """Truth and the product's estimates/intervals for ``releases`` noisy releases."""
    n = regression_n(r2, label)
    sums = regression_sums(r2, n)
    truth = flam_regression.regression_metrics(sums)
    encoded = sums / REG_CODEC.decode(np.ones(5))  # decode divides by the codec's factors
    rng = np.random.default_rng(seed)
    noisy = encoded[None, :] + _noise(rng, dist, REG_SCALE, (releases, 5))
    sigma = REG_SCALE if dist == "laplace" else math.sqrt(2.0) * REG_SCALE
    batch = regression_batch(
        noisy,
        REG_CODEC,
        sigma,
        distribution=dist,
        cohort=n / 20.0,  # type: ignore[arg-type]
    )
    return truth, batch
