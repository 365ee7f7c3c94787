"""Error-histogram buckets from squared magnitudes: the same cells as from the magnitudes.

:func:`dpledger.metrics.spatial.error_magnitude_cells` counts each sample's bucket on
a² + b² against per-edge thresholds instead of taking square roots. These tests hold it
to ``error_histogram_cells(error_magnitude(...))`` bit for bit — cells, factors, and the
error raised for bad data — on values at the edges, next to them, and at the extremes
where :func:`~dpledger.metrics.spatial.error_magnitude` switches to ``hypot``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.errors import InvalidInput
from dpledger.metrics import spatial as sp
from dpledger.metrics._magnitude import magnitude_buckets, root_thresholds
from dpledger.metrics._segments import CellCounts

POLICY_EDGES = (0.5, 1.0, 2.0, 5.0, 10.0, 25.0)
EDGE_SETS = (
    POLICY_EDGES,
    (0.0, 1e-140, 3.0, 1e140),  # the shortcut's widest edges
    (-1.0, 0.0, 0.7),
    (1e-160, 1.0),  # an edge below the shortcut's range: magnitudes are computed
    (1.0, 1e160),  # and above it
    tuple(float(x) for x in np.geomspace(0.01, 1000.0, 20)),  # > 16 edges: searchsorted
)


def _near(edges: tuple[float, ...]) -> list[float]:
    """Each edge, its neighbouring doubles, and values whose square lands next to it."""
    out = []
    for e in edges:
        for x in (e, abs(e)):
            out += [x, math.nextafter(x, math.inf), math.nextafter(x, -math.inf)]
            out.append(x / math.sqrt(2.0))  # (x/√2, x/√2): magnitude ≈ x
        # paired with e, these put a² + b² a few ulps above e², where the root rounds to e
        out += [abs(e) * 2.0**-k for k in range(22, 30)]
    return out


EXTREMES = [0.0, -0.0, 5e-324, 1e-170, 1e-150, 1e-140, 1e140, 1e150, 1e160, 1e300, -1e308]


def _same(want: CellCounts, got: CellCounts) -> None:
    np.testing.assert_array_equal(got.cells, want.cells)
    assert got.cells.dtype == want.cells.dtype
    assert got.n_cells == want.n_cells
    np.testing.assert_array_equal(got.seg.lengths, want.seg.lengths)
    assert want.factor is not None
    assert got.factor is not None
    np.testing.assert_array_equal(got.factor, want.factor)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(EDGE_SETS), st.data())
def test_buckets_from_squares_equal_buckets_of_the_magnitudes(
    edges: tuple[float, ...], data: st.DataObject
) -> None:
    pool = _near(edges) + EXTREMES
    value = st.one_of(
        st.sampled_from(pool),
        st.sampled_from(pool).map(lambda x: -x),
        st.floats(-1e3, 1e3, allow_nan=False),
    )
    n = data.draw(st.integers(0, 40))
    along = np.array(data.draw(st.lists(value, min_size=n, max_size=n)), dtype=np.float64)
    across = np.array(data.draw(st.lists(value, min_size=n, max_size=n)), dtype=np.float64)
    offsets = [0] if n == 0 else sorted({0, *data.draw(st.lists(st.integers(0, n), max_size=5))})
    want = sp.error_histogram_cells(
        sp.error_magnitude(along, across), edges=edges, cap=5.0, offsets=offsets
    )
    got = sp.error_magnitude_cells(along, across, edges=edges, cap=5.0, offsets=offsets)
    _same(want, got)


@pytest.mark.parametrize("edges", EDGE_SETS)
def test_every_pair_of_values_near_the_edges_gets_the_same_bucket(
    edges: tuple[float, ...],
) -> None:
    pool = np.array(_near(edges) + EXTREMES[:7])  # up to 1e140: no square above 1e300
    along, across = (g.reshape(-1) for g in np.meshgrid(pool, pool))
    in_range = all(e <= 0.0 or 1e-140 <= e <= 1e140 for e in edges)
    assert (magnitude_buckets(along, across, edges) is not None) == in_range
    want = sp.error_histogram_cells(sp.error_magnitude(along, across), edges=edges, cap=5.0)
    _same(want, sp.error_magnitude_cells(along, across, edges=edges, cap=5.0))


def test_the_shortcut_is_taken_for_the_policy_edges_and_not_beyond_its_range() -> None:
    errors = np.array([0.3, 4.0, -30.0])
    assert magnitude_buckets(errors, errors, POLICY_EDGES) is not None
    assert magnitude_buckets(errors, errors, (1e-160, 1.0)) is None
    assert magnitude_buckets(np.array([1e200]), np.array([0.0]), POLICY_EDGES) is None


def test_thresholds_are_the_largest_squares_whose_root_is_not_above_the_edge() -> None:
    edges = (0.0, 0.1, 0.5, 1.0, 2.0, 3.0, 1e-140, 1e140)
    for e, t in zip(edges, root_thresholds(edges), strict=True):
        assert math.sqrt(t) <= e < math.sqrt(math.nextafter(t, math.inf))
    assert root_thresholds((-2.0,))[0] == -math.inf


@pytest.mark.parametrize(
    ("along", "across", "edges", "cap"),
    [
        ([1.0, math.nan], [0.0, 0.0], POLICY_EDGES, 5.0),
        ([1.0, math.inf], [0.0, 0.0], POLICY_EDGES, 5.0),
        ([1.0, 2.0], [0.0], POLICY_EDGES, 5.0),
        ([1.0], [0.0], (2.0, 1.0), 5.0),
        ([1.0], [0.0], POLICY_EDGES, 0.0),
        ([1.0], [0.0], (), 5.0),
    ],
)
def test_bad_input_raises_what_the_magnitude_path_raises(
    along: list[float], across: list[float], edges: tuple[float, ...], cap: float
) -> None:
    with pytest.raises(InvalidInput) as want:
        sp.error_histogram_cells(sp.error_magnitude(along, across), edges=edges, cap=cap)
    with pytest.raises(InvalidInput) as got:
        sp.error_magnitude_cells(along, across, edges=edges, cap=cap)
    assert str(got.value) == str(want.value)
