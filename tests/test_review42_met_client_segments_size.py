"""Review 42 (met): ``client_segments(offsets, n_samples)`` took any n_samples ≥ 0. Past
int64 the index it returned had object lengths (``10**20``) or float lengths
(``2**64 - 1``), which every metric then refused as "not a partition ... build them
with client_segments", naming the very function that built them; uint64 offsets past
2**63 were refused as "not sorted, 0 then -9223372036854775808". The size is checked."""

from __future__ import annotations

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics.blocks import client_segments


@pytest.mark.parametrize("n", [10**20, 2**64 - 1, np.uint64(2**64 - 1), 2**63, -1])
def test_a_size_past_int64_is_named(n: int) -> None:
    with pytest.raises(dl.InvalidInput, match="n_samples must be in"):
        client_segments([0], n)


def test_uint64_offsets_past_int64_are_not_called_unsorted() -> None:
    with pytest.raises(dl.InvalidInput, match="n_samples"):
        client_segments(np.array([0, 2**63], dtype=np.uint64), 2**63 + 5)


def test_a_large_int64_size_still_builds_an_int64_index() -> None:
    seg = client_segments(np.array([0, 2], dtype=np.uint64), np.uint64(5))
    assert seg.lengths.dtype == np.int64
    assert seg.lengths.tolist() == [2, 3]
