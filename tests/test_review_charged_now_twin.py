"""Review (hrev): a repeat of a release id inside one round gets the first request's
release object, with ``retried`` False, so its ``charged_now`` reports the entry's charge a
second time: summing ``charged_now`` over a round's releases double-counts what the call
charged (``result.charged`` dedupes by entry id, the per-release figure does not)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from _stores import CONTRACT

from dpledger import Release, ReleaseRequest
from dpledger.errors import BudgetExceeded
from dpledger.ledger import Ledger


def req(rid: str) -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100, release_id=rid)


def test_a_twin_in_a_round_says_it_charged_nothing_now(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db", CONTRACT, mode="create") as ledger:
        result = ledger.release_round([(req("x"), 30.0), (req("x"), 30.0)])
        first, twin = result.outcomes
        assert isinstance(first, Release)
        assert isinstance(twin, Release)
        assert first.entry_id == twin.entry_id
        assert first.charged_now.amount == Fraction(1, 10)
        assert twin.retried
        assert twin.charged_now.amount == 0
        spent = ledger.spent(0, "a").amount
        assert sum(r.charged_now.amount for r in result.releases) == spent
        assert result.charged.amount == spent


def test_an_early_twin_in_a_round_says_it_charged_nothing_now(tmp_path: Path) -> None:
    """The 'early' path: a repeat that alone would be refused (float32 rounding of the
    aggregate pushes it past the clip bound) is a retry of the approved first request."""
    with Ledger.open(tmp_path / "l.db", CONTRACT, mode="create") as ledger:
        result = ledger.release_round([(req("y"), 100.0), (req("y"), 100.0 + 1e-9)],
                                      partial=True)  # fmt: skip
        releases = [o for o in result.outcomes if isinstance(o, Release)]
        spent = ledger.spent(0, "a").amount
        assert sum(r.charged_now.amount for r in releases) == spent == result.charged.amount


def test_a_refusal_names_its_position_in_a_round_with_a_twin(tmp_path: Path) -> None:
    """A round of two items whose second repeats the first's id: the refusal is still
    request 0 of a round (its position was named only when two requests were *new*)."""
    big = ReleaseRequest(epoch=0, metric="big", region="a", cohort=100, release_id="x")
    with Ledger.open(tmp_path / "l.db", CONTRACT, mode="create") as ledger:
        ledger.release(ReleaseRequest(epoch=0, metric="big", region="a", cohort=100), 30.0)
        with pytest.raises(BudgetExceeded) as refused:
            ledger.release_round([(big, 30.0), (big, 30.0)])
    assert refused.value.index == 0
    assert str(refused.value).startswith("request 0 of the round (from 0) (release id 'x')")
