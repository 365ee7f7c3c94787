"""Review (hfin): 2f3fa33 made a BudgetExceeded's committed ``spent``/``remaining`` the
global request's own binding loss on committed spend (region a's), but its ``scope`` is
still the binding region of committed + staged spend (b's): the error says "spent 1/2 at
epoch 0, all regions (binding: b)" where b's committed loss is 9/20. Its four fields must
describe one budget check: what ``Ledger.check`` of the request alone reports."""

from __future__ import annotations

from pathlib import Path

import pytest
from _stores import CONTRACT_POLICY

from dpledger import Policy, ReleaseRequest
from dpledger.errors import BudgetExceeded
from dpledger.ledger import Ledger

E45 = """[metrics.e45]
kind = "scalar_mean"
epsilon = "0.45"
clip = { low = "0", high = "1", source = "t" }

"""


def req(metric: str, region: str) -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric=metric, region=region, cohort=100)


def test_the_scope_is_the_one_spent_and_remaining_were_read_at(tmp_path: Path) -> None:
    policy = Policy.from_toml(CONTRACT_POLICY.replace("[metrics.big]", E45 + "[metrics.big]"))
    with Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        for _ in range(5):
            ledger.release(req("loss", "a"), 30.0)  # a: 1/2
        ledger.release(req("e45", "b"), 30.0)  # b: 9/20
        with pytest.raises(BudgetExceeded) as refused:
            ledger.release_round([(req("loss", "b"), 30.0), (req("big", "*"), 30.0)])
        alone = ledger.check(req("big", "*"), 30.0).budget
        assert alone is not None
        got = refused.value
        assert (got.spent, got.remaining) == (alone.spent, alone.remaining)
        assert got.scope == alone.scope  # "epoch 0, all regions (binding: a)"
