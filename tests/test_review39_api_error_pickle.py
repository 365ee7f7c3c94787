"""Review 39 (api): dpledger's errors did not survive pickling, which is how an error
crosses a process boundary (multiprocessing, concurrent.futures' process pools, Ray
actors running a Flower strategy). Exception pickling rebuilds ``cls(*self.args)``: a
:class:`ReleaseRefused` was rebuilt with its message as its verdict
(``AttributeError: 'str' object has no attribute 'summary'``), :class:`NotPermitted`
and :class:`CohortTooSmall` needed keyword-only arguments (``TypeError``), and a
:class:`PolicyError` prefixed ``<policy>:`` to its message a second time."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import pytest

import dpledger as dl
from dpledger.errors import NotPermitted
from tests.factories import policy


def _same(e: BaseException) -> BaseException:
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is type(e)
    assert str(back) == str(e)
    assert back.args == e.args
    return back


def test_plain_errors_round_trip() -> None:
    _same(dl.InvalidInput("cap must be finite"))
    p = _same(dl.PolicyError("must be > 0", source="p.toml", field="epoch_epsilon"))
    assert isinstance(p, dl.PolicyError)
    assert (p.source, p.field, p.problem) == ("p.toml", "epoch_epsilon", "must be > 0")
    n = _same(NotPermitted("no", key_id="k1", action="release", missing="region a"))
    assert isinstance(n, NotPermitted)
    assert (n.key_id, n.action, n.missing) == ("k1", "release", "region a")
    m = _same(dl.PolicyMismatch(message="another policy", index=2))
    assert isinstance(m, dl.PolicyMismatch)
    assert m.verdict is None
    assert m.index == 2


def test_refusals_from_a_ledger_round_trip(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        pol = policy()
    request = dl.ReleaseRequest(epoch=0, metric="loss", region="north", cohort=100)
    with dl.Ledger.open(tmp_path / "l.db", pol, mode="create") as ledger:
        for _ in range(10):
            ledger.release(request, 50.0)
        with pytest.raises(dl.BudgetExceeded) as over:
            ledger.release(request, 50.0)
        small = request.model_copy(update={"metric": "floored", "cohort": 2})
        with pytest.raises(dl.CohortTooSmall) as few:
            ledger.release(small, 1.0)
    b = _same(over.value)
    assert isinstance(b, dl.BudgetExceeded)
    assert (b.requested, b.spent, b.remaining, b.scope, b.staged) == (
        over.value.requested, over.value.spent, over.value.remaining,
        over.value.scope, over.value.staged,
    )  # fmt: skip
    assert b.verdict is not None
    assert b.verdict.summary() == over.value.verdict.summary()  # type: ignore[union-attr]
    c = _same(few.value)
    assert isinstance(c, dl.CohortTooSmall)
    assert (c.cohort, c.floor) == (few.value.cohort, few.value.floor)
