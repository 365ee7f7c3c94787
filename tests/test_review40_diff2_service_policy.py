"""The service plans and pages with the policy its ledger validated and enforces (review 40,
diff review): ``ServiceState.policy`` kept the caller's object while its ledgers held the
re-validated copy, so a policy changed under its cached budgets could plan with numbers the
ledger does not enforce."""

from __future__ import annotations

from typing import Any


def test_the_service_policy_is_the_ledgers(app: Any) -> None:
    state = app.state.service
    with state.ledger() as held:
        assert state.policy is held.policy
    assert state.policy == state.settings.policy
