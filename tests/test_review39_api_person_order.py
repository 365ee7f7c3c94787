"""Review 39 (api): ``keep_per_person`` grouped ids by sorting them (``np.unique``). For
ids whose ``<`` is no total order — frozensets, where it means "subset" — the sort left
equal ids apart, each occurrence its own code: with ids ``[a, b, a, b, a]`` and
``max_records=1`` every record was kept, person ``a`` three times, past the bound the
ledger's sensitivity assumes. And ``Decimal("sNaN")`` as an id raised decimal's
InvalidOperation (untyped) instead of being refused as a missing id, as NaN is."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics.records import keep_per_person, record_scalar

A, B = frozenset({1}), frozenset({2})


def test_ids_without_a_total_order_are_refused() -> None:
    with pytest.raises(InvalidInput, match="totally ordered"):
        keep_per_person([A, B, A, B, A], 1)
    with pytest.raises(InvalidInput, match="totally ordered"):
        record_scalar(np.ones(5), low=0, high=1, persons=[A, B, A, B, A], max_records=1)


def test_a_signalling_nan_id_is_a_missing_id() -> None:
    with pytest.raises(InvalidInput, match="missing"):
        keep_per_person([Decimal("sNaN"), Decimal("1")], 1)


def test_ordered_object_ids_still_group() -> None:
    assert keep_per_person(["b", "a", "b", "a"], 1).tolist() == [True, True, False, False]
    assert keep_per_person([Decimal("1"), 1.0, 1, 2], 1).tolist() == [True, False, False, True]
