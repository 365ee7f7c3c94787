"""The exact-sum stand-in for secure aggregation: caps hold after encoding, sums are exact."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.errors import InvalidInput
from dpledger.metrics.secure_sum import FixedPoint, exact_sum


def _exact(values: np.ndarray) -> list[Fraction]:
    """Column sums computed in exact rational arithmetic."""
    return [sum((Fraction(float(v)) for v in col), Fraction(0)) for col in values.T]


def test_a_sum_is_the_exact_sum_of_the_encoded_contributions() -> None:
    rng = np.random.default_rng(0)  # synthetic contributions, not noise
    rows = rng.normal(0, 3, (5000, 7))
    rows *= np.minimum(1.0, 20.0 / np.abs(rows).sum(axis=1))[:, None]  # L1 cap 20
    grid = FixedPoint.for_cap(20.0)
    total = exact_sum(rows, grid)
    encoded = grid.encode(rows).astype(np.float64) * grid.quantum
    assert [Fraction(float(t)) for t in total] == _exact(encoded)
    assert np.max(np.abs(total - rows.sum(axis=0))) <= 5000 * grid.quantum


@settings(max_examples=80, deadline=None)
@given(
    cap=st.floats(1e-3, 1e6),
    scale=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32 - 1),
    d=st.integers(1, 12),
)
def test_encoding_never_grows_a_contribution(cap: float, scale: float, seed: int, d: int) -> None:
    rng = np.random.default_rng(seed)
    rows = rng.normal(0, 1, (50, d))
    rows *= (cap * scale) / np.maximum(np.abs(rows).sum(axis=1), 1e-300)[:, None]
    grid = FixedPoint.for_cap(cap)
    decoded = grid.encode(rows).astype(np.float64) * grid.quantum
    assert np.all(np.abs(decoded) <= np.abs(rows))  # toward zero: every L1 cap still holds
    assert np.all(np.abs(rows - decoded) < grid.quantum)
    assert grid.quantum <= cap * 2.0**-grid.bits * 2


def test_a_scalar_clip_not_containing_zero_stays_inside_it() -> None:
    grid = FixedPoint(0.3, 5.7)
    values = np.array([0.3, 0.30000000001, 5.7, 1.0])
    decoded = grid.encode(values).astype(np.float64) * grid.quantum
    assert np.all((decoded >= 0.3) & (decoded <= 5.7))


def test_too_many_clients_for_an_exact_double_are_refused() -> None:
    grid = FixedPoint.for_cap(1.0, bits=40)  # quantum 2^-39: 2^39 units per client at most
    assert grid.quantum == 2.0**-39
    assert grid.max_clients == 2**53 // 2**39
    with pytest.raises(InvalidInput, match="exact range"):
        exact_sum(np.zeros((grid.max_clients + 1, 1)), grid)
    with pytest.raises(InvalidInput, match="bits"):
        FixedPoint(0.0, 1.0, bits=60)
    with pytest.raises(InvalidInput, match="low < high"):
        FixedPoint(1.0, 1.0)


@pytest.mark.parametrize(("low", "high", "bits"), [(0.3, 0.3000001, 8), (1.1, 1.1 + 1e-9, 26)])
def test_a_clip_interval_without_a_grid_point_is_refused(
    low: float, high: float, bits: int
) -> None:
    """Clamping to the nearest grid point would leave the interval (0.29882812 < 0.3)."""
    with pytest.raises(InvalidInput, match="no point of the grid"):
        FixedPoint(low, high, bits)


def test_encoding_preserves_but_does_not_enforce_an_l1_cap() -> None:
    grid = FixedPoint.for_cap(3.0)
    units = grid.encode([[3.0, 3.0, 3.0]])  # each coordinate within [−3, 3]: kept as is
    assert float(np.abs(units).sum()) * grid.quantum == 9.0  # the row's L1 9 > cap: not clipped


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ((0.0, 1e-320), "too close to 0"),  # the quantum underflowed: ZeroDivisionError
        (("0", "1"), "low must be a real number"),  # TypeError
        ((0.0, 10**400), "high must be finite"),  # OverflowError
        ((0.0, [1.0]), "high must be a real number"),
    ],
)
def test_a_grid_that_cannot_exist_is_refused_with_a_typed_error(
    args: tuple[object, ...], named: str
) -> None:
    with pytest.raises(InvalidInput, match=named):
        FixedPoint(*args)  # type: ignore[arg-type]


@pytest.mark.parametrize("clients", [10**400, 2**63, -1, True, "5", 2.0, None])
def test_sum_error_refuses_what_is_not_a_cohort_with_a_typed_error(clients: object) -> None:
    with pytest.raises(InvalidInput, match="clients must be an integer"):
        FixedPoint(0.0, 1.0).sum_error(clients)  # type: ignore[arg-type]


def test_sum_error_takes_a_numpy_count() -> None:
    grid = FixedPoint(0.0, 1.0)
    assert grid.sum_error(np.int64(5)) == grid.sum_error(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rows", "grid", "count"),
    [
        ([[5.0]], FixedPoint(0.0, 3.4), "1 of 1"),  # was read as 3.39999998
        ([[-1.0]], FixedPoint(0.0, 3.4), "1 of 1"),  # was read as 0
        ([[3.4000001]], FixedPoint(0.0, 3.4), "1 of 1"),  # 1e-7 out: more than rounding
        ([[1e300]], FixedPoint(0.0, 3.4), "1 of 1"),
        ([[1.0], [9.0], [2.0]], FixedPoint(0.0, 3.4), "1 of 3"),  # was summed to 6.4
        ([[5.0, 0.0], [0.5, -7.0]], FixedPoint.for_cap(1.0), "2 of 4"),  # was [1, 0]
        ([[0.0], [3.0]], FixedPoint(0.3, 5.7), "1 of 2"),  # was put on 0.3
    ],
)
def test_values_outside_the_grid_are_refused_not_clamped(
    rows: list[list[float]], grid: FixedPoint, count: str
) -> None:
    """Audit 5, F9: a clamped sum hid a failed client clip (and broke sum_error's bound)."""
    with pytest.raises(InvalidInput, match=rf"{count} contribution value.*outside the grid's"):
        exact_sum(rows, grid)
    with pytest.raises(InvalidInput, match="clip each client's contribution"):
        grid.encode(rows)


@pytest.mark.parametrize(
    "grid",
    [
        FixedPoint(0.0, 3.4),
        FixedPoint(0.3, 5.7),
        FixedPoint(-5.0, -1.0),
        FixedPoint.for_cap(1.0),
        FixedPoint.for_cap(40.0, bits=40),
        FixedPoint(0.0, math.nextafter(4.0, 0.0)),  # the next grid point is the next double
    ],
)
def test_float_rounding_past_an_edge_is_read_as_the_edge_within_one_quantum(
    grid: FixedPoint,
) -> None:
    below, above = grid.accepted_range()
    q = Fraction(grid.quantum)
    for edge, past, beyond in (
        (grid.high, above, math.nextafter(above, math.inf)),
        (grid.low, below, math.nextafter(below, -math.inf)),
    ):
        rounded = math.nextafter(edge, past)  # one double out: always accepted
        values = np.array([[rounded], [past]])
        units = grid.encode(values)
        assert units.tolist() == grid.encode([[edge], [edge]]).tolist()  # read as the edge
        for v, u in zip(values[:, 0].tolist(), units[:, 0].tolist(), strict=True):
            assert abs(Fraction(v) - int(u) * q) <= q  # so sum_error(n) still bounds the sum
        total = Fraction(float(exact_sum(values, grid)[0]))
        assert abs(total - Fraction(rounded) - Fraction(past)) <= Fraction(grid.sum_error(2))
        with pytest.raises(InvalidInput, match="1 of 1 contribution value"):
            grid.encode([[beyond]])
    assert below < grid.low
    assert grid.high < above
    assert above - grid.high <= grid.quantum
    assert grid.low - below <= grid.quantum
