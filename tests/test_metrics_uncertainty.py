"""Error bars on derived metrics: calibrated coverage, exactness on linear maps, value type.

Coverage tests simulate many noisy releases with numpy's Laplace sampler (test-only
noise: in the product, release noise comes from OpenDP) from fixed seeds, so each
run is deterministic. False-failure rates below are over seeds, from the binomial
distribution of the hit count at the method's true coverage.
"""

from __future__ import annotations

import dataclasses
import math
from statistics import NormalDist

import numpy as np
import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics import flam, uncertainty
from dpledger.metrics import flam_regression as fr
from dpledger.metrics import spatial as sp
from dpledger.metrics._assemble import to_intervals

C = 5
TRUE_CONFUSION = np.full((C, C), 150.0) + np.diag([5000.0, 3000.0, 2000.0, 1200.0, 600.0])
CONFUSION_SCALE = 40.0  # Laplace b = 2·cap/ε with cap 20, ε 1 (replace)

REG_BOUNDS = {"y_bounds": (50.0, 150.0), "residual_bound": 20.0, "max_samples": 20.0}
REG_CODEC = fr.regression_codec(cap=1.0, **REG_BOUNDS)  # type: ignore[arg-type]
REG_SCALE = 2.0  # Laplace b = 2·cap/ε on the encoded vector


def regression_release_truth() -> np.ndarray:
    """Encoded sum of 20,000 clients × 20 samples, y ~ 100 ± 10, a shrunk noisy model."""
    rng = np.random.default_rng(8)
    n_clients, per = 20_000, 20
    y = rng.normal(100.0, 10.0, n_clients * per)
    pred = 0.9 * y + 10.0 + rng.normal(0.0, 4.0, y.shape[0])
    rows = fr.regression_measures(y, pred, offsets=np.arange(n_clients) * per, **REG_BOUNDS)  # type: ignore[arg-type]
    return REG_CODEC.encode(rows).sum(axis=0)


def coverage_of(key: str, method: str, reps: int, seed: int, draws: int = 1000) -> float:
    """Share of ``reps`` seeded releases whose interval holds the truth. The delta method's
    intervals come from one batch (:func:`classification_batch`, :func:`regression_batch`),
    checked against the public one-release call at every 50th release; the Monte Carlo
    method's from one call a release (each draws with the release's own seed)."""
    rng = np.random.default_rng(seed)
    classification = key in flam.CLASSIFICATION_KEYS
    z = regression_release_truth()
    rows, seeds = [], []
    for _ in range(reps):  # noise, then a seed, a release: the stream of one call each
        if classification:
            rows.append(TRUE_CONFUSION + rng.laplace(0.0, CONFUSION_SCALE, (C, C)))
        else:
            rows.append(z + rng.laplace(0.0, REG_SCALE, z.shape))
        seeds.append(int(rng.integers(2**31)))
    if classification:
        truth = flam.classification_metrics(TRUE_CONFUSION)[key]

        def one(x: np.ndarray, s: int) -> dict[str, uncertainty.Interval]:
            return uncertainty.classification_intervals(
                x,
                CONFUSION_SCALE,
                method=method,
                draws=draws,
                seed=s,  # type: ignore[arg-type]
            )
    else:
        truth = fr.regression_metrics(REG_CODEC.decode(z))[key]

        def one(x: np.ndarray, s: int) -> dict[str, uncertainty.Interval]:
            return uncertainty.regression_intervals(
                x,
                REG_CODEC,
                REG_SCALE,
                method=method,
                draws=draws,
                seed=s,  # type: ignore[arg-type]
            )

    if method != "delta":
        return sum(one(x, s)[key].contains(truth) for x, s in zip(rows, seeds, strict=True)) / reps
    stack = np.stack([x.reshape(-1) for x in rows])
    if classification:
        batch = uncertainty.classification_batch(stack, CONFUSION_SCALE)
    else:
        batch = uncertainty.regression_batch(stack, REG_CODEC, REG_SCALE)
    ivs = [to_intervals(batch, 0.95, i) for i in range(reps)]
    for i in range(0, reps, 50):  # the batch's row is what a caller of one release gets
        assert one(rows[i], seeds[i]) == ivs[i], i
    return sum(iv[key].contains(truth) for iv in ivs) / reps


@pytest.mark.slow
@pytest.mark.parametrize("key", ["f1_macro", "mcc", "r2"])
def test_delta_method_95_intervals_cover_90_to_99_percent(key: str) -> None:
    """1,000 releases. Measured coverage with this seed: 94.4% (f1_macro), 94.8% (mcc),
    96.4% (r2); the normal approximation dips toward 93.7% when one Laplace coordinate
    dominates. At a true coverage in [93.5%, 96.5%], the chance over seeds of < 90% or
    > 99% hits in 1,000 is ≤ 1.1e-5 (binomial)."""
    cov = coverage_of(key, "delta", reps=1000, seed=20260501)
    assert 0.90 <= cov <= 0.99, cov


@pytest.mark.slow
@pytest.mark.parametrize("key", ["f1_macro", "r2"])
def test_monte_carlo_95_intervals_cover_90_to_99_percent(key: str) -> None:
    """500 releases × 1,000 redraws. At a true coverage of 94% (95%) the chance over seeds
    of falling outside [90%, 99%] is 1.8e-4 (1.8e-6), binomial."""
    cov = coverage_of(key, "monte_carlo", reps=500, seed=77)
    assert 0.90 <= cov <= 0.99, cov


def test_delta_method_is_exact_for_a_linear_metric() -> None:
    x = np.array([3.0, 4.0, 5.0])
    iv = uncertainty.derived_interval(lambda v: float(v.sum()), x, 2.0, level=0.9)
    half = NormalDist().inv_cdf(0.95) * math.sqrt(3 * 2 * 2.0**2)
    assert iv.low == pytest.approx(12.0 - half, rel=1e-9)
    assert iv.high == pytest.approx(12.0 + half, rel=1e-9)
    assert (iv.level, iv.method) == (0.9, "delta, Cornish–Fisher quantile")  # Laplace noise
    gauss = uncertainty.derived_interval(
        lambda v: float(v[0]), x, [2.0, 0.0, 0.0], distribution="gaussian"
    )
    assert gauss.half_width == pytest.approx(1.959963984540054 * 2.0, rel=1e-9)


def test_monte_carlo_is_reproducible_and_close_to_delta_for_linear_metric() -> None:
    x = np.arange(10.0)
    f = lambda v: float(v.sum())  # noqa: E731
    a = uncertainty.derived_interval(f, x, 1.0, method="monte_carlo", seed=3, draws=4000)
    b = uncertainty.derived_interval(f, x, 1.0, method="monte_carlo", seed=3, draws=4000)
    assert a == b
    delta = uncertainty.derived_interval(f, x, 1.0)
    assert a.half_width == pytest.approx(delta.half_width, rel=0.1)


def test_classification_intervals_stay_in_metric_range() -> None:
    tiny = np.array([[3.0, 0.0], [0.0, 2.0]])
    ivs = uncertainty.classification_intervals(tiny, 50.0)
    assert set(ivs) == set(flam.CLASSIFICATION_KEYS)
    for key, iv in ivs.items():
        lo = -1.0 if key == "mcc" else 0.0
        assert lo <= iv.low <= iv.high <= 1.0, key
    flat = uncertainty.classification_intervals(tiny.reshape(-1), 50.0)
    assert flat == ivs


def test_pooled_ratio_interval_through_its_codec() -> None:
    """20,000 clients × 20 samples; error bound 4 m keeps the decoded noise ≈ 1% of the sums."""
    codec = sp.pooled_ratio_codec(error_bound=4.0, max_samples=20.0, cap=1.0)
    rng = np.random.default_rng(2)
    along, across = rng.normal(0, 1, 400_000), rng.normal(0, 2, 400_000)
    rows = sp.pooled_along_across_ratio(
        along, across, error_bound=4.0, max_samples=20.0, offsets=np.arange(20_000) * 20
    )
    truth = sp.pooled_along_across_ratio_from_sums(rows.sum(axis=0))
    released = codec.encode(rows).sum(axis=0)  # noiseless: the bar is centred on the truth
    iv = uncertainty.derived_interval(
        lambda v: sp.pooled_along_across_ratio_from_sums(codec.decode(v)), released, 2.0
    )
    assert iv.low < truth < iv.high
    # Delta method by hand: Var(ratio) ≈ r²/4 · (Var A / A² + Var B / B²), Var = 2·(decoded b)²;
    # the quantile of the two-term Laplace sum is Cornish–Fisher's with its excess kurtosis.
    b = codec.decoded_scale(2.0)
    sums = codec.decode(released)
    w = np.array([math.sqrt(2) * b[0] / sums[0], math.sqrt(2) * b[1] / sums[1]]) * truth / 2
    z = NormalDist().inv_cdf(0.975)
    kurtosis = 3 * np.sum(w**4) / np.sum(w**2) ** 2
    q = z + kurtosis / 24 * (z**3 - 3 * z)
    assert iv.half_width == pytest.approx(q * math.sqrt(np.sum(w**2)), rel=1e-3)
    assert iv.half_width < 0.05


def test_interval_is_a_frozen_validated_value() -> None:
    iv = uncertainty.Interval(0.1, 0.3, 0.95, "delta")
    assert iv.contains(0.2)
    assert not iv.contains(0.31)
    assert iv.half_width == pytest.approx(0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        iv.low = 0.0  # type: ignore[misc]
    with pytest.raises(InvalidInput, match="level"):
        uncertainty.Interval(0.1, 0.3, 1.5, "delta")
    with pytest.raises(InvalidInput, match="low"):
        uncertainty.Interval(0.4, 0.3, 0.95, "delta")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"level": 0.0}, "level"),
        ({"method": "bootstrap"}, "method"),
        ({"distribution": "cauchy"}, "distribution"),
        ({"method": "monte_carlo", "draws": 2}, "draws"),
    ],
)
def test_bad_interval_requests_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        uncertainty.derived_interval(lambda v: float(v[0]), [1.0, 2.0], 1.0, **kwargs)  # type: ignore[arg-type]


def test_bad_scale_is_refused() -> None:
    with pytest.raises(InvalidInput, match="scale"):
        uncertainty.derived_interval(lambda v: float(v[0]), [1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(InvalidInput, match="≥ 0"):
        uncertainty.derived_interval(lambda v: float(v[0]), [1.0, 2.0], -1.0)


@pytest.mark.parametrize(
    "bad",
    [
        {"noisy_sum": "x"},
        {"noisy_sum": None},
        {"noisy_sum": [1.0, 2.0], "noisy_count": [5.0, 5.0]},  # one release per call
        {"noisy_count": True},
        {"max_count": "10"},
        {"max_count": float("nan")},
        {"max_count": float("inf")},
        {"bounds": ("a", "b")},
        {"bounds": (0, 1, 2)},
        {"bounds": None},
    ],
)
def test_the_mean_over_a_noisy_count_refuses_bad_input_with_a_typed_error(
    bad: dict[str, object],
) -> None:
    from dpledger.errors import InvalidInput
    from dpledger.metrics import mean_over_noisy_count

    args: dict[str, object] = dict(noisy_sum=1.0, sum_scale=1.0, noisy_count=5.0,
                                   count_scale=1.0, bounds=(0.0, 1.0), max_count=10)  # fmt: skip
    with pytest.raises(InvalidInput):
        mean_over_noisy_count(**{**args, **bad})  # type: ignore[arg-type]


@pytest.mark.parametrize("draws", [10, 200, 999])
def test_monte_carlo_refuses_fewer_draws_than_cover(draws: int) -> None:
    # stats6, F-DRAWS: 10 draws covered 0.74–0.76, 200 draws 0.939–0.946 in an easy cell
    x = np.array([3.0, 4.0, 5.0])
    with pytest.raises(InvalidInput, match="draws must be an integer ≥ 1,000"):
        uncertainty.derived_interval(
            lambda v: float(v.sum()), x, 2.0, method="monte_carlo", draws=draws
        )
    iv = uncertainty.derived_interval(
        lambda v: float(v.sum()), x, 2.0, method="monte_carlo", draws=1000
    )
    assert iv.low < 12.0 < iv.high


def test_monte_carlo_redraws_differ_between_releases_and_repeat_for_one() -> None:
    """Review s28s: with ``seed`` alone every single-release call reused one redraw noise,
    freezing its quantile error into every interval (3 classes, an easy cell: 0.933–0.939
    at 1,000 draws under the default seed; 0.954–0.958 once seeded by the release too)."""
    from dpledger.metrics._redraws import redraws

    std = np.full(9, 2.0)
    a, b = np.full((1, 9), 10.0), np.full((1, 9), 10.0)
    b[0, 0] = 10.5
    ((_, sa),) = redraws(a, std, distribution="laplace", draws=1000, seed=0)
    ((_, sb),) = redraws(b, std, distribution="laplace", draws=1000, seed=0)
    assert not np.allclose(sa - a, sb - b)  # another release: other noise
    ((_, again),) = redraws(a, std, distribution="laplace", draws=1000, seed=0)
    np.testing.assert_array_equal(sa, again)  # the same release and seed: the same
    ((_, other),) = redraws(a, std, distribution="laplace", draws=1000, seed=1)
    assert not np.allclose(sa, other)
    x = TRUE_CONFUSION + 3.0
    one = uncertainty.classification_intervals(x, CONFUSION_SCALE, method="monte_carlo")
    two = uncertainty.classification_intervals(x, CONFUSION_SCALE, method="monte_carlo")
    assert one == two
