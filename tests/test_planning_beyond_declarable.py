"""``budget_for_target`` refuses a budget no policy may declare (review 42 sta, suspected).

It returned ε 3,002,000,000 for a target of 1e-10 at n = 10 as if a policy could hold it,
while it already refused the opposite end (a budget below 2.2e-308); ``required_budget``
still reports the figure, with ``enough`` false.
"""

from __future__ import annotations

import pytest
from factories import policy

from dpledger.errors import InvalidInput
from dpledger.planning import budget_for_target, required_budget
from dpledger.policy.base import MAX_BUDGET


def test_a_budget_past_what_a_policy_declares_is_refused_naming_it() -> None:
    with pytest.raises(InvalidInput, match=r"needs ε ≈ 3\.002e\+09 per release, beyond the 1e9"):
        budget_for_target(policy(), "floored", 1e-10, 10)
    need = budget_for_target(policy(), "floored", 1e-3, 10)  # a declarable one still returns
    assert 0 < need.amount <= MAX_BUDGET


def test_required_budget_still_reports_the_figure() -> None:
    report = required_budget(policy(), targets={"floored": 1e-10}, cohorts={"north": 10})
    rows = [r for region in report.regions for r in region.metrics if r.metric == "floored"]
    assert rows
    assert rows[0].required.amount > MAX_BUDGET
    assert not rows[0].enough
    assert not report.regions[0].fits
