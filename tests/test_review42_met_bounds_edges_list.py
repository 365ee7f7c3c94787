"""Review 42 (met): ``Bounds`` (frozen) validated its ``edges`` but kept the caller's
object: a list changed after the Bounds was built changed its edges (contributions then
counted over other buckets than the policy's), and a Bounds with list edges could not be
hashed. The edges are kept as a tuple, as ``VectorSumCodec`` keeps its bounds (review 40)."""

from __future__ import annotations

import numpy as np

from dpledger.metrics.declarations import DECLARATIONS, Bounds


def test_edges_changed_after_the_bounds_do_not_change_them() -> None:
    edges = [1.0, 2.0]
    bounds = Bounds(cap=5.0, edges=edges)  # type: ignore[arg-type]
    edges[0] = 1.5
    assert bounds.edges == (1.0, 2.0)
    assert hash(bounds) == hash(Bounds(cap=5.0, edges=(1.0, 2.0)))
    rows = DECLARATIONS["error_histogram"].contribute(
        {"along": np.array([1.2]), "across": np.array([0.0])}, bounds
    )
    assert rows.tolist() == [[0.0, 1.0, 0.0]]  # 1.2 is past the edge 1.0, not below 1.5


def test_array_edges_are_kept_as_numbers() -> None:
    assert Bounds(edges=np.array([1, 2])).edges == (1, 2)  # type: ignore[arg-type]
