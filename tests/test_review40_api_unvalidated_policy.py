"""Review 40 (api): ``Ledger.open`` trusted any ``Policy`` instance. One built with pydantic's
unvalidated ``Policy.model_construct(...)``, one changed after validation with
``object.__setattr__`` (its cached budget and hash left as they were), or a subclass with
its own ``eval_budget`` was recorded and enforced as it stood: an ``eval_fraction`` of
1000 let one region spend 1000× ε_eval, and the recorded body was one no dpledger can
read back. The ledger now validates its policy again from its fields, as a plain
``Policy``, and uses that validated copy; an invalid one is a ``PolicyError`` before
anything is opened."""

from __future__ import annotations

import warnings
from fractions import Fraction
from pathlib import Path

import pytest

import dpledger as dl
from dpledger.planning.definitions import compare_definitions
from tests.factories import policy


def _quiet_policy() -> dl.Policy:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        return policy()


def _fields(p: dl.Policy) -> dict[str, object]:
    return {k: getattr(p, k) for k in type(p).model_fields}


REQUEST = dl.ReleaseRequest(epoch=0, metric="loss", region="north", cohort=100)


@pytest.mark.parametrize(
    "change",
    [
        {"eval_fraction": Fraction(1000)},
        {"epoch_epsilon": Fraction(-4)},
        {"delta": 5.0},
        {"regions": {"names": ["north", "north"]}},
    ],
)
def test_an_unvalidated_policy_is_refused_before_anything_is_opened(
    tmp_path: Path, change: dict[str, object]
) -> None:
    bad = dl.Policy.model_construct(**{**_fields(_quiet_policy()), **change})
    path = tmp_path / "l.db"
    with pytest.raises(dl.PolicyError, match="model_construct"):
        dl.Ledger.open(path, bad, mode="create")
    assert not path.exists()


def test_a_policy_changed_after_validation_is_refused(tmp_path: Path) -> None:
    p = _quiet_policy()
    assert p.eval_budget == 1  # cached before the change
    object.__setattr__(p, "eval_fraction", Fraction(1000))
    with pytest.raises(dl.PolicyError):
        dl.Ledger.open(tmp_path / "l.db", p, mode="create")


def test_cached_budgets_cannot_outlive_their_fields(tmp_path: Path) -> None:
    p = _quiet_policy()
    p.__dict__["eval_budget"] = Fraction(1000)  # a stale (or forged) cached value
    with dl.Ledger.open(tmp_path / "l.db", p, mode="create") as ledger:
        spent = Fraction(0)
        for _ in range(30):
            try:
                spent += ledger.release(REQUEST, 50.0).charge.amount
            except dl.BudgetExceeded:
                break
        assert spent == 1
        assert type(ledger.policy) is dl.Policy
        assert ledger.verify().ok


def test_a_valid_constructed_policy_is_accepted_as_its_validated_copy(tmp_path: Path) -> None:
    p = _quiet_policy()
    same = dl.Policy.model_construct(**_fields(p))
    with dl.Ledger.open(tmp_path / "l.db", same, mode="create") as ledger:
        assert ledger.policy == p
        assert ledger.policy.content_hash == p.content_hash
        ledger.release(REQUEST, 50.0)
    with dl.Ledger.open(tmp_path / "l.db", p, mode="read") as ledger:
        assert ledger.verify().ok


def test_a_policy_subclass_is_enforced_as_the_policy_it_declares(tmp_path: Path) -> None:
    class Generous(dl.Policy):
        @property
        def eval_budget(self) -> Fraction:  # type: ignore[override]
            return Fraction(1000)

    p = _quiet_policy()
    generous = Generous.model_validate(_fields(p))
    assert generous.eval_budget == 1000
    with dl.Ledger.open(tmp_path / "l.db", generous, mode="create") as ledger:
        spent = Fraction(0)
        for _ in range(30):
            try:
                spent += ledger.release(REQUEST, 50.0).charge.amount
            except dl.BudgetExceeded:
                break
        assert spent == 1
        assert type(ledger.policy) is dl.Policy


@pytest.mark.parametrize(
    "call",
    [
        lambda p: dl.plan(p, {"north": 100}),
        lambda p: dl.required_budget(p, {"north": 100}, {"loss": 0.5}),
        lambda p: dl.budget_for_target(p, "loss", 0.5, 100),
        lambda p: compare_definitions(p, {"north": 100}),
    ],
    ids=["plan", "required_budget", "budget_for_target", "compare_definitions"],
)
def test_a_planner_validates_its_policy_as_a_ledger_does(call: object) -> None:
    """Stop 41 (left open by review 40): a plan of an unvalidated policy printed budgets and
    bars for an ``eval_fraction`` of 1000 that no ledger would ever open with."""
    assert callable(call)
    bad = dl.Policy.model_construct(**{**_fields(_quiet_policy()), "eval_fraction": Fraction(1000)})
    with pytest.raises(dl.PolicyError, match="a planner validates its policy again"):
        call(bad)
    assert call(_quiet_policy()) is not None  # a valid one plans as before
