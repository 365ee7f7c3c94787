"""Sensitivity soundness: one client moves the summed contribution by at most the declared Δ.

For every metric, adversarial cohorts (extreme finite values, subnormals, ±max
float, a 10,000-sample client against a 1-sample one) are summed with and without
one client, and with that client's data replaced. The change, in the declared norm
(absolute for a scalar, L1 for a vector), must not exceed the declared sensitivity
under ``replace`` and ``add_remove``. Tolerance: 1e-12 relative to Δ plus a few ulps
of the sums themselves (the float rounding of summing the contributions). Δ is the ledger's own rule
(``dpledger.mechanisms.sensitivity``) applied to the policy metric releasing them.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dpledger.mechanisms import CLIENT_ROUNDING_SLACK, sensitivity
from dpledger.metrics import flam
from dpledger.metrics.declarations import (
    FLAM_DECLARATIONS,
    SPATIAL_DECLARATIONS,
    Bounds,
    MetricDeclaration,
)
from dpledger.policy import Clip, MetricSpec

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")  # no overflow noise

BIG = float(np.finfo(np.float64).max)
EPS = float(np.finfo(np.float64).eps)
HEAVY = 10_000
EDGES = (0.5, 1.0, 2.0, 5.0, 10.0, 25.0)
N_CLASSES = 4

Columns = tuple[np.ndarray, ...]
POOLED = {"error_bound": 25.0, "max_samples": 40.0}
REGRESSION = {"y_bounds": (0.0, 200.0), "residual_bound": 50.0, "max_samples": 40.0}
COVER_EDGES = (0.0, 1.0, 4.0, 16.0, 64.0)

extreme = st.sampled_from([0.0, -0.0, BIG, -BIG, 5e-324, -5e-324, 1e-300, 1e300, -1e300])
any_float = st.floats(allow_nan=False, allow_infinity=False) | extreme
unit = st.floats(0.0, 1.0) | st.sampled_from([0.0, 1.0, 0.2, 0.8, 0.999999])
cell = st.integers(-(2**63), 2**63 - 1) | st.integers(0, 70)
label = st.integers(0, N_CLASSES - 1)


@dataclass(frozen=True)
class Case:
    """A declared metric under test: its bounds and settings, and its per-sample inputs."""

    declaration: MetricDeclaration
    bounds: Bounds
    params: dict[str, Any]
    elements: tuple[tuple[Any, st.SearchStrategy[Any]], ...]  # (dtype, element strategy)

    def contribute(self, cols: Columns, offsets: np.ndarray) -> np.ndarray:
        data = dict(zip(self.declaration.inputs, cols, strict=True))
        return self.declaration.contribute(data, self.bounds, offsets=offsets, **self.params)

    def spec(self) -> MetricSpec:
        """The policy metric that releases these contributions (the ledger's view of them)."""
        d, b = self.declaration, self.bounds
        common: dict[str, Any] = {"kind": d.kind, "epsilon": 1}
        if d.kind == "scalar_mean":
            return MetricSpec(clip=Clip(low=b.low, high=b.high, source="test"), **common)
        if d.kind == "histogram":
            return MetricSpec(edges=b.edges, edges_version="v1", cap_per_client=b.cap, **common)
        width = self.contribute(tuple(np.zeros(0, dt) for dt, _ in self.elements), np.array([0]))
        return MetricSpec(dimension=width.shape[1], cap_per_client=b.cap,
                          nonnegative=d.nonnegative, **common)  # fmt: skip


SPATIAL, FLAM = SPATIAL_DECLARATIONS, FLAM_DECLARATIONS
CASES = {
    "clipped_loss": Case(
        SPATIAL["clipped_loss"], Bounds(low=0.0, high=2.5), {}, ((np.float64, any_float),)
    ),
    "along_across_ratio": Case(
        SPATIAL["along_across_ratio"], Bounds(low=0.0, high=10.0), {},
        ((np.float64, any_float), (np.float64, any_float)),
    ),
    "pooled_along_across_ratio": Case(
        SPATIAL["pooled_along_across_ratio"], Bounds(cap=3.0), POOLED,
        ((np.float64, any_float), (np.float64, any_float)),
    ),
    "error_histogram": Case(
        SPATIAL["error_histogram"], Bounds(cap=40.0, edges=EDGES), {},
        ((np.float64, any_float), (np.float64, any_float)),
    ),
    "calibration_gap": Case(
        SPATIAL["calibration_gap"], Bounds(cap=20.0, dimension=10), {},
        ((np.float64, unit), (np.float64, unit)),
    ),
    "coverage": Case(
        SPATIAL["coverage"], Bounds(cap=1.0, edges=COVER_EDGES), {}, ((np.int64, cell),)
    ),
    "confusion_matrix": Case(
        FLAM["confusion_matrix"], Bounds(cap=30.0), {"n_classes": N_CLASSES},
        ((np.int64, label), (np.int64, label)),
    ),
    "regression_measures": Case(
        FLAM["regression_measures"], Bounds(cap=2.0), REGRESSION,
        ((np.float64, any_float), (np.float64, any_float)),
    ),
}  # fmt: skip


def client_strategy(case: Case) -> st.SearchStrategy[Columns]:
    return st.integers(0, 12).flatmap(
        lambda n: st.tuples(*(arrays(dt, n, elements=el) for dt, el in case.elements))
    )


def heavy(client: Columns) -> Columns:
    """The same client holding 10,000 samples (its data tiled); empty stays empty."""
    return client if client[0].size == 0 else tuple(np.resize(c, HEAVY) for c in client)


def cohort_sum(case: Case, clients: list[Columns]) -> np.ndarray:
    """Sum of the clients' contributions, computed with the batch (offsets) form."""
    width = len(case.elements)
    if not clients:
        d = case.contribute(tuple(np.zeros(0, dt) for dt, _ in case.elements), np.array([0]))
        return np.zeros(d.shape[1])
    cols = tuple(np.concatenate([cl[k] for cl in clients]) for k in range(width))
    lengths = [cl[0].size for cl in clients]
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    rows = case.contribute(cols, offsets)
    assert rows.shape[0] == len(clients)
    return rows.sum(axis=0)


def norm(case: Case, v: np.ndarray) -> float:
    return float(np.abs(v).sum())  # |x| for a scalar (d = 1), L1 for a vector


def assert_within(case: Case, a: np.ndarray, b: np.ndarray, neighbouring: str) -> None:
    delta = float(sensitivity(case.spec(), neighbouring))  # the rule the ledger charges by
    slack = delta * 1e-12 + 8 * EPS * (norm(case, a) + norm(case, b))
    moved = norm(case, a - b)
    assert moved <= delta + slack, (neighbouring, moved, delta)


@pytest.mark.parametrize("name", CASES)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_one_client_moves_the_sum_by_at_most_the_declared_sensitivity(
    name: str, data: st.DataObject
) -> None:
    case = CASES[name]
    client = client_strategy(case)
    cohort = data.draw(st.lists(client, min_size=1, max_size=5), label="cohort")
    victim = data.draw(st.integers(0, len(cohort) - 1), label="victim")
    other = data.draw(client, label="replacement")
    if data.draw(st.booleans(), label="replacement holds 10,000 samples"):
        other = heavy(other)
    if data.draw(st.booleans(), label="victim holds 10,000 samples"):
        cohort[victim] = heavy(cohort[victim])
    full = cohort_sum(case, cohort)
    replaced = cohort_sum(case, [*cohort[:victim], other, *cohort[victim + 1 :]])
    removed = cohort_sum(case, [*cohort[:victim], *cohort[victim + 1 :]])
    assert_within(case, full, replaced, "replace")
    assert_within(case, full, removed, "add_remove")


@pytest.mark.parametrize("name", CASES)
def test_ten_thousand_samples_move_the_sum_no_more_than_one(name: str) -> None:
    case = CASES[name]
    rng = np.random.default_rng(7)

    def sample(n: int) -> Columns:
        out = []
        for dt, _ in case.elements:
            if np.issubdtype(dt, np.integer):
                out.append(rng.integers(0, N_CLASSES, n))
            else:
                out.append(rng.random(n) * (1.0 if name == "calibration_gap" else 1e6))
        return tuple(out)

    crowd = [sample(30) for _ in range(4)]
    assert_within(
        case, cohort_sum(case, [*crowd, sample(HEAVY)]), cohort_sum(case, crowd), "add_remove"
    )
    assert_within(
        case,
        cohort_sum(case, [*crowd, sample(HEAVY)]),
        cohort_sum(case, [*crowd, sample(1)]),
        "replace",
    )


def test_signed_vectors_are_declared_signed() -> None:
    assert not SPATIAL["calibration_gap"].nonnegative
    assert not FLAM["regression_measures"].nonnegative
    assert SPATIAL["error_histogram"].nonnegative
    kinds = {d.metric: d.kind for d in SPATIAL.values()}
    assert kinds == {
        "clipped_loss": "scalar_mean",
        "along_across_ratio": "scalar_mean",
        "pooled_along_across_ratio": "vector_sum",
        "error_histogram": "histogram",
        "calibration_gap": "vector_sum",
        "coverage": "histogram",
    }


def _exact_l1(row: np.ndarray) -> Fraction:
    """The exact L1 norm of a vector of doubles (no rounding in the sum)."""
    return sum((abs(Fraction(float(v))) for v in row.reshape(-1)), Fraction(0))


def test_a_ten_million_sample_confusion_matrix_holds_its_cap_exactly() -> None:
    """Issue 11: adding cap/n per sample in a float running sum put one client's L1 mass at
    50.000000010 for cap 50 at 10⁷ samples, past CLIENT_ROUNDING_SLACK. Integer counts
    scaled once stay within 2·2⁻⁵³ of the cap."""
    n = 10_000_000
    rng = np.random.default_rng(11)  # synthetic labels, not noise
    y = rng.integers(0, 10, n)
    pred = np.where(rng.random(n) < 0.9, y, rng.integers(0, 10, n))
    rows = flam.confusion_matrix(y, pred, n_classes=10, cap=50.0)
    mass = _exact_l1(rows)
    assert mass <= Fraction(50) * (1 + Fraction(2, 2**53))
    assert mass <= Fraction(50) * (1 + CLIENT_ROUNDING_SLACK)
    assert abs(mass - 50) < Fraction(1, 10**12)  # and it is the cap, not less


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(0, 40_000), min_size=1, max_size=5),
    cap=st.floats(0.5, 1e6) | st.sampled_from([1.0, 3.0, 7.0, 50.0, 0.1 + 0.2]),
    n_classes=st.integers(2, 12),
    seed=st.integers(0, 2**32 - 1),
)
def test_capped_confusion_rows_never_exceed_the_cap_by_more_than_two_ulps(
    counts: list[int], cap: float, n_classes: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    n = sum(counts)
    y, pred = rng.integers(0, n_classes, n), rng.integers(0, n_classes, n)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    rows = flam.confusion_matrix(y, pred, n_classes=n_classes, offsets=offsets, cap=cap)
    for row, k in zip(rows, counts, strict=True):
        mass = _exact_l1(row)
        assert mass <= Fraction(cap) * (1 + Fraction(2, 2**53))  # the cap, within two ulps
        if k <= cap:  # below the cap the counts are the exact integers
            assert mass == k
