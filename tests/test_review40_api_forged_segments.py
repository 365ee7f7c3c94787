"""Review 40 (api): a ``Segments`` (the shared client index, exported by
``dpledger.metrics.blocks``) is a plain dataclass of public arrays, and every metric took
one as ``offsets=`` on trust, checking only ``n_samples``. The sums read its ``starts``;
the person bound and the counts read per-sample ids built from its ``lengths``. Built by
hand with the two disagreeing, ``record_scalar`` summed two records of one person into
one silo under ``max_records = 1`` (its sensitivity assumes one), and reported the other
silo as having dropped records it never held. Now a Segments is checked to be a
partition of its samples (one pass over the clients) wherever one is taken, and a
validated one cannot be changed in place under the ids it caches."""

from __future__ import annotations

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics import DECLARATIONS, Bounds, clipped_loss
from dpledger.metrics.blocks import Segments, client_segments, group_sums, rows_in_blocks
from dpledger.metrics.records import record_histogram, record_scalar

FORGED = [
    Segments(np.array([0, 3]), np.array([2, 2]), 4),  # starts disagree with the lengths
    Segments(np.array([0, 0]), np.array([4, 4]), 4),  # one sample in two clients
    Segments(np.array([0, 2]), np.array([2, 1]), 4),  # a sample in no client
    Segments(np.array([1, 2]), np.array([1, 2]), 4),  # not from 0
    Segments(np.array([0, 2]), np.array([-2, 6]), 4),  # negative length
    Segments(np.array([0.0, 2.0]), np.array([2.0, 2.0]), 4),  # type: ignore[arg-type]
    Segments([0, 2], [2, 2], 4),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("seg", FORGED)
def test_a_hand_built_inconsistent_index_is_refused(seg: Segments) -> None:
    persons = ["p"] * 4
    with pytest.raises(dl.InvalidInput, match="not a partition"):
        record_scalar(np.ones(4), low=0, high=1, offsets=seg, persons=persons, max_records=1)
    with pytest.raises(dl.InvalidInput, match="not a partition"):
        record_histogram(np.ones(4), edges=[0.5], offsets=seg, persons=persons, max_records=1)
    with pytest.raises(dl.InvalidInput, match="not a partition"):
        clipped_loss(np.ones(4), clip_high=1.0, offsets=seg)
    with pytest.raises(dl.InvalidInput, match="not a partition"):
        group_sums(clipped_loss, np.ones(4), offsets=seg, grid=None, clip_high=1.0)
    with pytest.raises(dl.InvalidInput, match="not a partition"):
        rows_in_blocks(lambda a, s: np.zeros(s.n_clients), [np.ones(4)], seg, lambda: None)
    loss, bounds = DECLARATIONS["clipped_loss"], Bounds(low=0.0, high=1.0)
    with pytest.raises(dl.InvalidInput, match="not a partition"):
        loss.contribute({"loss": np.ones(4)}, bounds, offsets=seg)
    with pytest.raises(dl.InvalidInput, match="not a partition"):
        loss.contribute_sums({"loss": np.ones(4)}, bounds, offsets=seg)


def test_the_person_bound_holds_with_a_shared_index() -> None:
    seg = client_segments([0, 2], 4)
    out = record_scalar(np.ones(4), low=0, high=1, offsets=seg, persons=["p"] * 4, max_records=1)
    assert out.records.tolist() == [1, 1]
    assert out.dropped.tolist() == [1, 1]


def test_a_validated_index_cannot_change_in_place() -> None:
    seg = client_segments([0, 2], 4)
    _ = seg.ids  # cached from the lengths
    with pytest.raises(ValueError, match="read-only"):
        seg.lengths[0] = 3
    with pytest.raises(ValueError, match="read-only"):
        seg.starts[1] = 3
    np.testing.assert_array_equal(clipped_loss(np.ones(4), clip_high=1.0, offsets=seg), [1, 1])


def test_a_consistent_hand_built_index_is_accepted_as_a_copy() -> None:
    starts, lengths = np.array([0, 1, 1]), np.array([1, 0, 3])
    seg = Segments(starts, lengths, 4)
    np.testing.assert_array_equal(
        clipped_loss(np.array([0.5, 1.0, 0.0, 0.5]), clip_high=1.0, offsets=seg),
        [0.5, 0.0, 0.5],
    )
    starts[1] = 3  # the caller's arrays stay theirs (and writable)


def test_a_segments_subclass_is_read_as_plain_segments() -> None:
    class Zero(Segments):
        def sum(self, values: np.ndarray) -> np.ndarray:  # type: ignore[override]
            return np.zeros((self.n_clients, *values.shape[1:]))

    base = client_segments([0, 2], 4)
    seg = Zero(base.starts, base.lengths, 4)  # read-only arrays, consistent
    np.testing.assert_array_equal(clipped_loss(np.ones(4), clip_high=1.0, offsets=seg), [1, 1])
