"""Review 42 (met): ``along_across_ratio`` rescaled EVERY client's errors by a power of
two near its own largest error as soon as ANY client in the call had an error beyond
1e100 m. For a client whose squared across errors underflow (1e-160 m), that changed its
row: 1e-152 beside such a client, 9.99994e-153 alone, so a batch (or block) row depended
on another client's data, against the module's "a client's row depends on its own
samples only" (the block machinery's bit-for-bit claim rests on it). Only a client with
an error beyond 1e100 m is rescaled now."""

from __future__ import annotations

import numpy as np

from dpledger.metrics import along_across_ratio


def test_a_row_does_not_depend_on_another_clients_huge_errors() -> None:
    along = np.array([1e-8, 1e120, 3.0, 2e101, -1e-3])
    across = np.array([1e-160, 1.0, 4.0, -5e100, 1e-170])
    offsets = [0, 1, 2, 3, 4]
    batch = along_across_ratio(along, across, offsets=offsets, clip=10.0)
    alone = [along_across_ratio(along[i : i + 1], across[i : i + 1], clip=10.0) for i in range(5)]
    np.testing.assert_array_equal(batch, alone)


def test_huge_errors_still_give_their_scale_free_ratio() -> None:
    ratio = along_across_ratio(np.array([4e200, 3e200]), np.array([3e200, 4e200]), clip=10.0)
    assert ratio == 1.0
