"""An error magnitude whose square underflows read as 0 m (review 44 G).

``error_magnitude`` computes sqrt(a² + b²) and promises ``np.hypot`` "for the entries
where squaring would overflow or underflow", but it recomputed only 0 < r < 1e-150: an
error of 1e-170 m (or (3e-200, 4e-200)) squares to exactly 0, so its magnitude was 0.0
instead of 1e-170 (5e-200). The error histogram then counted that sample at or below an
edge it lies above: with edges (0, 1) (bucket 0 = "no error at all") in bucket 0, by
both the full path and the squared-magnitude fast path, and with edges (1e-200, 1) too.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.metrics import error_histogram, error_magnitude
from dpledger.metrics.declarations import DECLARATIONS, Bounds


def test_a_magnitude_whose_square_underflows_is_hypot() -> None:
    got = error_magnitude([1e-170, 0.0, 3e-200, -2e-320], [0.0, 0.0, 4e-200, 0.0])
    want = np.hypot([1e-170, 0.0, 3e-200, -2e-320], [0.0, 0.0, 4e-200, 0.0])
    assert got.tolist() == want.tolist()  # was [0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("edges", [(0.0, 1.0), (1e-200, 1.0)])
def test_a_tiny_nonzero_error_is_counted_above_the_edge_below_it(
    edges: tuple[float, float],
) -> None:
    along, across = [1e-170, 0.0, 0.5], [0.0, 0.0, 0.0]
    want = [1.0, 2.0, 0.0]  # the exact 0 at or below the first edge; 1e-170 and 0.5 above
    by_magnitude = error_histogram(error_magnitude(along, across), edges=edges, cap=5.0)
    assert by_magnitude.tolist() == want
    declared = DECLARATIONS["error_histogram"].contribute(
        {"along": along, "across": across}, Bounds(edges=edges, cap=5.0)
    )
    assert declared.tolist() == [want]  # the fast path (edge 0) and the full path agree
