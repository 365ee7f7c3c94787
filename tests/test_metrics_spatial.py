"""Spatial metric set: seed behaviours, bucket rules, batch form, input validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.errors import InvalidInput
from dpledger.metrics import spatial as sp

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")  # no overflow noise

SEED_EDGES = (0.5, 1.0, 2.0, 5.0, 10.0, 25.0)


def offsets_of(lengths: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)


# --------------------------------------------------------------------------- seed behaviours


def test_heavy_client_contributes_exactly_cap_of_histogram_mass() -> None:
    heavy = sp.error_histogram(np.full(10_000, 0.2), edges=SEED_EDGES, cap=100)
    assert heavy.shape == (7,)
    assert math.isclose(heavy.sum(), 100.0, rel_tol=1e-12)
    assert heavy[0] == pytest.approx(100.0)


def test_light_client_keeps_its_raw_counts() -> None:
    light = sp.error_histogram(np.full(5, 0.2), edges=SEED_EDGES, cap=100)
    assert light.sum() == 5.0
    assert light.tolist() == [5.0, 0, 0, 0, 0, 0, 0]


def test_isotropic_errors_give_ratio_near_one() -> None:
    assert sp.along_across_ratio(np.ones(100), np.ones(100)) < 1.2


def test_sideways_drift_gives_large_ratio() -> None:
    assert sp.along_across_ratio(np.ones(100), np.full(100, 6.0)) > 5.0


def test_degenerate_client_pins_at_the_clip() -> None:
    assert sp.along_across_ratio(np.zeros(10), np.full(10, 500.0)) == 10.0


def test_empty_client_ratio_is_one() -> None:
    assert sp.along_across_ratio([], []) == 1.0


def test_overconfident_model_shows_top_bucket_gap() -> None:
    prob = np.full(100, 0.9)
    outcome = np.r_[np.zeros(50), np.ones(50)]
    gaps = sp.mean_calibration_gaps(sp.calibration_gap(prob, outcome, cap=100))
    assert gaps[-1] > 0.3
    assert gaps[-1] == pytest.approx(0.4)
    assert np.isnan(gaps[:-1]).all()


# --------------------------------------------------------------------------- clipped loss


def test_clipped_loss_clips_the_client_mean_not_each_sample() -> None:
    # mean = (0 + 0 + 12)/3 = 4 < 5: a single large sample does not pin the client.
    assert sp.clipped_loss([0.0, 0.0, 12.0], clip_high=5.0) == pytest.approx(4.0)
    assert sp.clipped_loss([7.0, 9.0], clip_high=5.0) == 5.0
    assert sp.clipped_loss([-3.0, 1.0], clip_high=5.0) == 0.0


def test_clipped_loss_of_empty_client_is_zero() -> None:
    assert sp.clipped_loss([], clip_high=2.0) == 0.0


def test_clipped_loss_survives_huge_finite_losses() -> None:
    big = np.finfo(np.float64).max
    assert sp.clipped_loss([big, big, big], clip_high=3.0) == 3.0
    assert sp.clipped_loss([-big, big, -big], clip_high=3.0) == 0.0
    mixed = np.r_[[big, big], [0.1, 0.2, 0.4]]
    rows = sp.clipped_loss(mixed, clip_high=3.0, offsets=[0, 2])
    assert rows.tolist() == [3.0, sp.clipped_loss(mixed[2:], clip_high=3.0)]


# --------------------------------------------------------------------------- along/across


def test_ratio_is_across_rmse_over_along_rmse() -> None:
    along, across = np.array([3.0, -4.0]), np.array([6.0, 8.0])
    expected = math.sqrt((36 + 64) / 2) / math.sqrt((9 + 16) / 2)
    assert sp.along_across_ratio(along, across) == pytest.approx(expected, rel=1e-15)


def test_ratio_is_scale_free_and_bounded_for_extremes() -> None:
    along, across = np.array([1.0, 2.0]), np.array([3.0, 1.0])
    base = sp.along_across_ratio(along, across)
    for k in (1e-8, 1e-3, 1e100, 1e300):  # along RMSE stays above the 1e-9 m floor
        assert sp.along_across_ratio(along * k, across * k) == pytest.approx(base, rel=1e-14)
    big = np.finfo(np.float64).max
    assert sp.along_across_ratio([big, -big], [big, big]) == pytest.approx(1.0)
    assert sp.along_across_ratio([1e-10], [1e-10]) == 10.0  # along RMSE ≤ 1e-9 m
    assert sp.along_across_ratio([1.0], [big], clip=3.0) == 3.0
    assert sp.along_across_ratio([6.96e114], [6.27e276]) == 10.0  # ratio overflows: clip


def test_pooled_ratio_answers_a_different_question_than_mean_of_ratios() -> None:
    # Client A: 1 sample, isotropic. Client B: 99 samples, across = 3 × along.
    along = np.r_[1.0, np.ones(99)]
    across = np.r_[1.0, np.full(99, 3.0)]
    offsets = [0, 1]
    per_client = sp.along_across_ratio(along, across, offsets=offsets)
    assert per_client.tolist() == pytest.approx([1.0, 3.0])
    assert per_client.mean() == pytest.approx(2.0)  # "the typical client"
    rows = sp.pooled_along_across_ratio(along, across, error_bound=100.0, offsets=offsets)
    pooled = sp.pooled_along_across_ratio_from_sums(rows.sum(axis=0))
    assert pooled == pytest.approx(math.sqrt((1 + 99 * 9) / 100))  # "every sample once"


def test_pooled_measures_clip_errors_and_weight_samples() -> None:
    along = np.r_[np.full(40, 2.0), 50.0]
    across = np.r_[np.full(40, 1.0), -50.0]
    row = sp.pooled_along_across_ratio(along, across, error_bound=10.0, max_samples=20)
    w = 20 / 41
    assert row == pytest.approx([w * (40 + 100), w * (40 * 4 + 100), 20.0])
    small = sp.pooled_along_across_ratio([1.0], [2.0], error_bound=10.0, max_samples=20)
    assert small.tolist() == [4.0, 1.0, 1.0]


def test_pooled_ratio_from_sums_handles_noise_and_degenerate_sums() -> None:
    assert sp.pooled_along_across_ratio_from_sums([4.0, 1.0, 3.0]) == 2.0
    assert sp.pooled_along_across_ratio_from_sums([4.0, -1.0, 3.0]) == math.inf
    assert sp.pooled_along_across_ratio_from_sums([4.0, 0.0, 3.0], clip=10.0) == 10.0
    assert math.isnan(sp.pooled_along_across_ratio_from_sums([-2.0, 0.0, 3.0]))
    with pytest.raises(InvalidInput, match="shape"):
        sp.pooled_along_across_ratio_from_sums([1.0, 2.0])


def test_pooled_codec_round_trips_and_caps_l1() -> None:
    codec = sp.pooled_ratio_codec(error_bound=10.0, max_samples=50, cap=2.0)
    rng = np.random.default_rng(1)
    along, across = rng.normal(0, 30, 500), rng.normal(0, 30, 500)
    rows = sp.pooled_along_across_ratio(
        along, across, error_bound=10.0, max_samples=50, offsets=[0, 3, 3, 200]
    )
    z = codec.encode(rows)
    assert np.abs(z).sum(axis=1).max() <= 2.0 * (1 + 1e-12)
    assert codec.decode(z.sum(axis=0)) == pytest.approx(rows.sum(axis=0), rel=1e-12)
    assert codec.dimension == 3
    with pytest.raises(InvalidInput, match="exceeds its per-client bound"):
        codec.encode([1e9, 0.0, 1.0])


# --------------------------------------------------------------------------- histogram


def test_histogram_bucket_counts_edges_strictly_below() -> None:
    edges = [1.0, 2.0, 3.0]
    values = [0.0, 1.0, 1.0000001, 2.0, 2.5, 3.0, 3.5, 100.0]
    rule = [sum(e < v for e in edges) for v in values]
    hist = sp.error_histogram(values, edges=edges, cap=1e9)
    assert hist.tolist() == np.bincount(rule, minlength=4).tolist()
    assert hist.tolist() == [2.0, 2.0, 2.0, 2.0]


@pytest.mark.parametrize("n_edges", [3, 16, 17, 40])
def test_histogram_bucket_rule_holds_for_few_and_many_edges(n_edges: int) -> None:
    rng = np.random.default_rng(n_edges)
    edges = np.cumsum(rng.random(n_edges) + 0.01)
    values = np.r_[rng.random(500) * edges[-1] * 1.2, edges, -1.0]
    hist = sp.error_histogram(values, edges=edges, cap=1e9)
    rule = np.searchsorted(edges, values, side="left")  # number of edges < v
    assert hist.tolist() == np.bincount(rule, minlength=n_edges + 1).tolist()


def test_histogram_cap_keeps_bucket_shares() -> None:
    values = np.r_[np.full(300, 0.1), np.full(100, 7.0)]
    hist = sp.error_histogram(values, edges=SEED_EDGES, cap=40)
    assert hist.sum() == pytest.approx(40.0)
    assert hist[0] / hist[4] == pytest.approx(3.0)


def test_error_magnitude_is_hypot() -> None:
    assert sp.error_magnitude([3.0, 0.0], [4.0, -2.0]).tolist() == [5.0, 2.0]
    big = np.finfo(np.float64).max
    extreme = sp.error_magnitude([1e200, 3e-200, big, 0.0], [1e200, 4e-200, 0.0, 0.0])
    assert extreme == pytest.approx([math.sqrt(2) * 1e200, 5e-200, big, 0.0], rel=1e-15)
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 5, 1000), rng.normal(0, 5, 1000)
    assert sp.error_magnitude(a, b) == pytest.approx(np.hypot(a, b), rel=4e-16)


# --------------------------------------------------------------------------- calibration


def test_calibration_bucket_rule_and_vector_layout() -> None:
    prob = np.array([0.0, 0.19, 0.2, 0.5, 0.99, 1.0])
    outcome = np.array([0.0, 1.0, 0.0, 1.0, 1.0, 0.0])
    vec = sp.calibration_gap(prob, outcome, buckets=5, cap=100)
    buckets = np.minimum(4, np.floor(prob * 5)).astype(int)
    assert vec[5:].tolist() == np.bincount(buckets, minlength=5).tolist()
    expected_sums = np.bincount(buckets, weights=prob - outcome, minlength=5)
    assert vec[:5] == pytest.approx(expected_sums)


def test_calibration_cap_preserves_mean_gaps() -> None:
    rng = np.random.default_rng(3)
    prob = rng.random(5000)
    outcome = (rng.random(5000) < prob * 0.8).astype(float)
    raw = sp.calibration_gap(prob, outcome, cap=1e12)
    capped = sp.calibration_gap(prob, outcome, cap=10)
    assert np.abs(capped).sum() == pytest.approx(10.0)
    assert sp.mean_calibration_gaps(capped) == pytest.approx(sp.mean_calibration_gaps(raw))


def test_mean_calibration_gaps_needs_counts_above_min_count() -> None:
    gaps = sp.mean_calibration_gaps([1.0, 2.0, 0.5, 4.0], min_count=1.0)
    assert np.isnan(gaps[0])
    assert gaps[1] == 0.5
    with pytest.raises(InvalidInput, match="even length"):
        sp.mean_calibration_gaps([1.0, 2.0, 3.0])


# --------------------------------------------------------------------------- coverage


def test_coverage_is_one_hot_of_distinct_cell_count() -> None:
    cells = [5, 5, 5, 9, 1, 2, 3, 4, 4, 8]
    offsets = [0, 4, 4]
    counts = sp.distinct_cells(cells, offsets=offsets)
    assert counts.tolist() == [2.0, 0.0, 5.0]
    onehot = sp.coverage(cells, edges=[0, 1, 3], offsets=offsets)
    assert onehot.tolist() == [[0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 1]]
    assert (onehot.sum(axis=1) == 1).all()


def test_coverage_handles_huge_cell_ids() -> None:
    # H3-style uint64 ids: the span overflows int64 keys, so the lexsort path runs.
    cells = np.array([2**63 + 5, 2**63 + 5, 7, 2**64 - 1], dtype=np.uint64)
    assert sp.distinct_cells(cells, offsets=[0, 2]).tolist() == [1.0, 2.0]
    signed = np.array([-(2**62), 2**62, 2**62, 0], dtype=np.int64)
    assert sp.distinct_cells(signed).tolist() == [3.0]


def test_distinct_cells_of_equal_sized_and_uneven_clients() -> None:
    rng = np.random.default_rng(4)
    table = rng.integers(0, 6, (50, 8))
    got = sp.distinct_cells(table.reshape(-1), offsets=np.arange(50) * 8)
    assert got.tolist() == [float(len(set(row))) for row in table.tolist()]
    uneven = sp.distinct_cells(table.reshape(-1)[:-1], offsets=np.arange(50) * 8)
    assert uneven.tolist()[:-1] == got.tolist()[:-1]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(-(2**40), 2**40) | st.integers(0, 5), max_size=12), max_size=6
    ).filter(bool)
)
def test_distinct_cells_matches_a_set_count(clients: list[list[int]]) -> None:
    flat = np.array([c for cl in clients for c in cl], dtype=np.int64)
    got = sp.distinct_cells(flat, offsets=offsets_of([len(c) for c in clients]))
    assert got.tolist() == [float(len(set(c))) for c in clients]


# --------------------------------------------------------------------------- batch form


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 25), min_size=1, max_size=8), st.integers(0, 2**32 - 1))
def test_batch_rows_equal_per_client_results(lengths: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = sum(lengths)
    offsets = offsets_of(lengths)
    bounds = np.r_[offsets, n]
    loss = rng.exponential(2.0, n)
    along, across = rng.normal(0, 2, n), rng.normal(0, 3, n)
    prob, outcome = rng.random(n), (rng.random(n) < 0.5).astype(float)
    cells = rng.integers(0, 20, n)
    batch = {
        "loss": sp.clipped_loss(loss, clip_high=3.0, offsets=offsets),
        "ratio": sp.along_across_ratio(along, across, offsets=offsets),
        "pooled": sp.pooled_along_across_ratio(
            along, across, error_bound=4.0, max_samples=10, offsets=offsets
        ),
        "hist": sp.error_histogram(np.abs(along), edges=SEED_EDGES, cap=7, offsets=offsets),
        "calib": sp.calibration_gap(prob, outcome, cap=6, offsets=offsets),
        "cover": sp.coverage(cells, edges=[0, 2, 5, 10], offsets=offsets),
    }
    for i in range(len(lengths)):
        s = slice(bounds[i], bounds[i + 1])
        single = {
            "loss": sp.clipped_loss(loss[s], clip_high=3.0),
            "ratio": sp.along_across_ratio(along[s], across[s]),
            "pooled": sp.pooled_along_across_ratio(
                along[s], across[s], error_bound=4.0, max_samples=10
            ),
            "hist": sp.error_histogram(np.abs(along[s]), edges=SEED_EDGES, cap=7),
            "calib": sp.calibration_gap(prob[s], outcome[s], cap=6),
            "cover": sp.coverage(cells[s], edges=[0, 2, 5, 10]),
        }
        for key, value in single.items():
            np.testing.assert_array_equal(batch[key][i], value, err_msg=key)
    empty = [i for i, k in enumerate(lengths) if k == 0]
    assert (batch["loss"][empty] == 0.0).all()
    assert (batch["ratio"][empty] == 1.0).all()
    assert (batch["cover"][empty, 0] == 1.0).all()


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: sp.clipped_loss([1.0, math.nan], clip_high=1.0), "loss holds NaN or inf"),
        (lambda: sp.clipped_loss([1.0, math.inf], clip_high=1.0), "index 1"),
        (lambda: sp.clipped_loss([1.0], clip_high=0.0), "clip_high must be finite and > 0"),
        (lambda: sp.clipped_loss(["a"], clip_high=1.0), "real numbers"),
        (lambda: sp.clipped_loss([[1.0]], clip_high=1.0), "1-dimensional"),
        (lambda: sp.along_across_ratio([1.0], [1.0, 2.0]), "along=1, across=2"),
        (lambda: sp.along_across_ratio([1.0], [1.0], clip=-1), "clip must be"),
        (lambda: sp.clipped_loss([1.0, 2.0], clip_high=1, offsets=[1]), "start at 0"),
        (lambda: sp.clipped_loss([1.0, 2.0], clip_high=1, offsets=[0, 2, 1]), "sorted"),
        (lambda: sp.clipped_loss([1.0, 2.0], clip_high=1, offsets=[0, 3]), "past the samples"),
        (  # a uint64 start past 2⁶³ wrapped negative and was called unsorted
            lambda: sp.clipped_loss([1.0, 2.0], clip_high=1, offsets=np.array([0, 2**63], "u8")),
            "past the samples: 9223372036854775808 > 2",
        ),
        (lambda: sp.clipped_loss([1.0], clip_high=1, offsets=[0.0]), "integers"),
        (lambda: sp.clipped_loss([1.0], clip_high=1, offsets=[]), "non-empty"),
        (lambda: sp.error_histogram([1.0], edges=[2.0, 1.0], cap=1), "strictly increasing"),
        (lambda: sp.error_histogram([1.0], edges=[1.0, math.inf], cap=1), "edges holds NaN"),
        (lambda: sp.error_histogram([1.0], edges=[], cap=1), "at least one edge"),
        (lambda: sp.error_histogram([1.0], edges=[1.0], cap=math.inf), "cap must be"),
        (lambda: sp.calibration_gap([1.2], [1.0], cap=1), r"prob must lie in \[0, 1\]"),
        (lambda: sp.calibration_gap([0.2], [-1.0], cap=1), r"outcome must lie in \[0, 1\]"),
        (lambda: sp.calibration_gap([0.2], [1.0], buckets=0, cap=1), "buckets must be"),
        (lambda: sp.coverage([1.5], edges=[1]), "integer cell ids"),
        (lambda: sp.pooled_along_across_ratio([1.0], [1.0], error_bound=1e200), "error_bound"),
        (
            lambda: sp.pooled_along_across_ratio([1.0], [1.0], error_bound=1.0, max_samples=0),
            "max_samples",
        ),
    ],
)
def test_bad_input_is_refused_naming_the_problem(call: object, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        call()  # type: ignore[operator]


def test_invalid_input_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="NaN"):
        sp.error_histogram([math.nan], edges=[1.0], cap=1)


@pytest.mark.parametrize(
    ("cells", "dtype"),
    [
        ([-128, 127, 127, 0], np.int8),
        ([2**64 - 1, 2**64 - 2, 2**64 - 1, 0], np.uint64),
        ([-(2**63), 2**63 - 1, 0, 0], np.int64),
        ([70000, 5, 70000, 65535], np.uint32),
    ],
)
def test_distinct_cells_is_exact_for_every_integer_dtype(cells: list[int], dtype: type) -> None:
    arr = np.array(cells, dtype=dtype)
    assert sp.distinct_cells(arr, offsets=[0, 2]).tolist() == [
        float(len(set(cells[:2]))),
        float(len(set(cells[2:]))),
    ]


def test_an_empty_client_stays_within_a_ratio_clip_below_one() -> None:
    # the "isotropic" default of an empty client must not exceed the declared clip
    rows = sp.along_across_ratio(
        np.array([1.0, 1.0]), np.array([5.0, 5.0]), clip=0.5, offsets=np.array([0, 2])
    )
    assert rows.tolist() == [0.5, 0.5]
