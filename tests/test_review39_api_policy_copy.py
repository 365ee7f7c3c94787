"""Review 39 (api): ``Policy.model_copy(update=...)`` — pydantic's documented way to derive a
changed frozen model — skipped validation and kept the original's cached derived values
(``eval_budget``, allocations, ``content_hash``). A copy that lowered ``epoch_epsilon``
from 40 to 4 still enforced ε_eval = 10: the ledger recorded the new policy (ε_eval = 1)
and let one region spend 10 under it; ``verify`` then reported the overspend. A copy
with an invalid field (``eval_fraction`` = 1000, ``delta`` = 5) was recorded too, and
the ledger's own audit could never read it back."""

from __future__ import annotations

import warnings
from fractions import Fraction
from pathlib import Path

import pytest

import dpledger as dl
from tests.factories import policy


def _quiet_policy(**fields: str) -> dl.Policy:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        return policy(**fields)


def test_a_copy_with_a_lower_budget_enforces_the_lower_budget(tmp_path: Path) -> None:
    p = _quiet_policy(epoch_epsilon="40")
    assert p.eval_budget == 10  # cached on the original
    _ = p.content_hash
    q = p.model_copy(update={"epoch_epsilon": Fraction(4)})
    assert q.eval_budget == 1
    assert q.content_hash == dl.Policy.from_mapping(q.model_dump(mode="json")).content_hash
    request = dl.ReleaseRequest(epoch=0, metric="loss", region="north", cohort=100)
    with dl.Ledger.open(tmp_path / "l.db", q, mode="create") as ledger:
        spent = Fraction(0)
        for _ in range(200):
            try:
                spent += ledger.release(request, 50.0).charge.amount
            except dl.BudgetExceeded:
                break
        assert spent == 1
        assert ledger.verify().ok


@pytest.mark.parametrize(
    "update",
    [
        {"eval_fraction": Fraction(1000)},
        {"delta": 5.0},
        {"privacy_unit": "record"},
        {"no_such_field": 1},
    ],
)
def test_a_copy_is_validated_like_a_loaded_policy(update: dict[str, object]) -> None:
    p = _quiet_policy()
    with pytest.raises(dl.PolicyError):
        p.model_copy(update=update)


def test_a_copy_without_changes_is_the_same_policy() -> None:
    p = _quiet_policy()
    q = p.model_copy()
    assert q == p
    assert q.content_hash == p.content_hash
    assert p.model_copy(update={}).content_hash == p.content_hash


def test_a_spec_changed_unvalidated_is_checked_inside_the_policy() -> None:
    # a MetricSpec (or Clip, or Regions) instance was not validated again by the policy
    # holding it: a spec copied with epsilon -1/10 made a policy whose release_budget was
    # -1/10. Their model_copy(update=...) now validates (InvalidInput at the copy), and one
    # built unvalidated (model_construct) is still checked inside the policy.
    p = _quiet_policy()
    loss = p.metrics["loss"]
    with pytest.raises(dl.InvalidInput, match="epsilon"):
        loss.model_copy(update={"epsilon": Fraction(-1, 10)})
    spec = type(loss).model_construct(**{**dict(loss), "epsilon": Fraction(-1, 10)})
    with pytest.raises(dl.PolicyError, match="epsilon"):
        p.model_copy(update={"metrics": {**p.metrics, "loss": spec}})
    clip = loss.clip
    assert clip is not None
    with pytest.raises(dl.InvalidInput, match=r"clip|low|high"):
        clip.model_copy(update={"low": 5})
    flipped = type(clip).model_construct(**{**dict(clip), "low": Fraction(5)})
    upside_down = type(loss).model_construct(**{**dict(loss), "clip": flipped})
    with pytest.raises(dl.PolicyError, match="clip"):
        p.model_copy(update={"metrics": {**p.metrics, "loss": upside_down}})
    with pytest.raises(dl.InvalidInput, match="unique"):
        p.regions.model_copy(update={"names": ("north", "north")})
    regions = type(p.regions).model_construct(names=("north", "north"), open=False)
    with pytest.raises(dl.PolicyError, match="unique"):
        p.model_copy(update={"regions": regions})
