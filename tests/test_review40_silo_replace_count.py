"""Review 40 (silo): under a record-level ``replace`` policy the scalar charge
Δ = k·(high − low) holds only for a person replaced by one with as many kept records (the
record count is public under ``replace``). With a clip that excludes 0 (a [1, 5] rating)
and k = 2, one record at 1 replaced by two at 5 moves the sum by 9 > Δ = 8. The docs did
not state this assumption (the hypothesis test in test_record_sensitivity.py replaces a
person's records "with the same count" without the docs saying so); they now do, and
point to ``add_remove`` where a person's record count is private. Deterministic."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpledger.mechanisms import release_sensitivity
from dpledger.metrics.records import record_scalar
from dpledger.policy import Clip, MetricSpec

DOCS = Path(__file__).resolve().parents[1] / "docs" / "privacy-model.md"
SPEC = MetricSpec(
    kind="scalar_mean", epsilon="1", target=0.1, clip=Clip(low="1", high="5", source="rating")
)


def _total(values: list[float], persons: list[str]) -> float:
    sums = record_scalar(values, low=1.0, high=5.0, persons=persons, max_records=2)
    return float(sums.total()[0])


def test_a_same_count_replacement_is_within_the_charge_a_larger_one_is_not() -> None:
    delta = release_sensitivity(SPEC, "replace", "laplace", records=2)
    base = _total([1.0, 3.0], ["p", "q"])  # p: one record at 1
    same = _total([5.0, 3.0], ["p", "q"])  # p replaced: one record at 5
    more = _total([5.0, 5.0, 3.0], ["p", "p", "q"])  # p replaced: two records at 5
    assert abs(same - base) <= delta
    assert abs(more - base) > delta  # 9 > 8: outside the relation, as the docs now say
    assert np.isclose(abs(more - base), 9.0)


def test_the_docs_state_the_same_count_assumption_under_replace() -> None:
    text = " ".join(DOCS.read_text(encoding="utf-8").split())
    assert "replaced by one with as many kept records" in text
    assert "use `add_remove`" in text
