"""Integer aggregates are read by their type, never refused by their size.

Outside audit 5, F2: an integer sum above 2**53 was refused (``aggregate_dtype``),
uncharged, while its neighbour one unit below was approved — a refusal on the private
sum's size, reachable within a policy's bounds (cap 1e12, ~9,000 clients). Integers are
now rounded to the nearest double, as the caller's own float64 would be (the bar's
``sum_slack`` allows for it); Python integers past 64 bits alike, also beside a float
(numpy then keeps them as objects: review s27b).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import dpledger as dl

TOML = """
name = "big"
version = "1"
neighbouring = "{relation}"
epoch_epsilon = "100"
[regions]
names = ["na"]
[metrics.counts]
kind = "vector_sum"
dimension = 2
cap_per_client = "1000000000000"
nonnegative = true
epsilon = "1"
"""
REQ = dl.ReleaseRequest(epoch=0, metric="counts", region="na", cohort=10_000)


@pytest.mark.parametrize(
    ("relation", "edge"),  # replace bounds the sum by cap × cohort = 1e16 (refused above)
    [("replace", 2**53), ("add_remove", 2**53), ("add_remove", 2**63), ("add_remove", 2**64)],
)
def test_neighbouring_integer_sums_get_the_same_decision(
    tmp_path: Path, relation: str, edge: int
) -> None:
    policy = dl.Policy.from_toml(TOML.format(relation=relation), source="big")
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        verdicts = []
        for total in (edge - 1, edge, edge + 1):
            for agg in ([total, 0], np.array([total, 0], dtype=object), [total, 0.5]):
                verdicts.append(ledger.check(REQ, agg))
        assert all(v.approved for v in verdicts), [v.summary() for v in verdicts]
        rel = ledger.release(REQ, [edge + 1, 0])
        assert abs(rel.value[0] - float(edge)) <= 20 * rel.error_bar  # noise, not refusal


def test_an_integer_beyond_a_double_is_the_inf_it_denotes_and_refused_as_not_finite(
    tmp_path: Path,
) -> None:
    # as a float of that size is (review s28: a dtype refusal for 310–4,300 digits and a
    # finiteness refusal beyond, by the number's size, made two words for one problem)
    from dpledger.approval.aggregate import as_float64

    arr, why = as_float64([10**400, 0])
    assert why == ""
    assert arr is not None
    assert arr.tolist() == [math.inf, 0.0]
    policy = dl.Policy.from_toml(TOML.format(relation="add_remove"), source="big")
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        said = set()
        for huge in (10**400, 10**5000, float("inf")):
            verdict = ledger.check(REQ, [huge, 0])
            assert not verdict.approved
            assert next(c.name for c in verdict.checks if not c.passed) == "aggregate_finite"
            said.add(verdict.summary())
        assert len(said) == 1  # one refusal, whatever the number's digits
