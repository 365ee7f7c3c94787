"""Review (hrev): a global request refused in an all-or-nothing round reports committed
``spent``/``remaining`` at the binding region of committed + staged spend. When the
round's earlier requests move the binding region (b overtakes a), ``remaining`` is b's
committed headroom (11/20), not what the ledger has left for this global request (1/2,
binding a): a caller resubmitting it alone with ε ≤ 11/20 is refused. Fixed: committed spent and
remaining are the request's own binding loss on committed spend (a's), and the scope
named is the one they were read at (review hfin: it named b's)."""

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


def test_remaining_is_what_the_ledger_has_left_for_the_request(tmp_path: Path) -> None:
    policy = Policy.from_toml(CONTRACT_POLICY.replace("[metrics.big]", E45 + "[metrics.big]"))
    with Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        for _ in range(5):
            ledger.release(req("loss", "a"), 30.0)  # a: 1/2
        ledger.release(req("e45", "b"), 30.0)  # b: 9/20
        with pytest.raises(BudgetExceeded) as refused:
            ledger.release_round([(req("loss", "b"), 30.0), (req("big", "*"), 30.0)])
        alone = ledger.check(req("big", "*"), 30.0).budget
        assert alone is not None
        assert refused.value.remaining == alone.remaining  # was 11/20 against 1/2
        assert refused.value.scope == alone.scope  # "binding: a" (hfin: it said b's)
        assert refused.value.spent == alone.spent
        assert refused.value.staged is not None
        assert (
            refused.value.spent + refused.value.staged + alone.requested
            > alone.spent + alone.remaining
        )
