"""A round of releases in one transaction, on every store: all or nothing, every budget
and allocation checked under one lock against what the round itself adds, idempotent."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from _stores import CONTRACT_POLICY, StoreUnderTest

from dpledger import (
    BudgetExceeded,
    CohortTooSmall,
    Policy,
    PolicyWarning,
    ReleaseIdConflict,
    ReleaseRequest,
    Verdict,
)
from dpledger.errors import InvalidInput

N = 100
with pytest.warns(PolicyWarning, match="over-committed"):  # on purpose: the ledger holds it
    PER_METRIC = Policy.from_toml(CONTRACT_POLICY.replace('allocation = "pooled"', ""))


def req(metric: str, region: str, *, epoch: int = 0, rid: str | None = None) -> ReleaseRequest:
    edges = {"hist5": "h5/v1", "hist20": "h20/v1"}.get(metric)
    return ReleaseRequest(epoch=epoch, metric=metric, region=region, cohort=N,
                          edges_version=edges, release_id=rid)  # fmt: skip


AGG = {"loss": 30.0, "big": 30.0, "hist5": np.full(5, 20.0), "hist20": np.full(20, 5.0)}


def round_of(metrics: tuple[str, ...], regions: str = "ab") -> list[tuple[ReleaseRequest, object]]:
    return [(req(m, r), AGG[m]) for m in metrics for r in regions]


def test_a_round_commits_every_release_together(store: StoreUnderTest) -> None:
    ledger = store.open(PER_METRIC)
    result = ledger.release_round(round_of(("loss", "hist5", "hist20")))
    assert [r.entry_id for r in result.releases] == [1, 2, 3, 4, 5, 6]
    assert result.refusals == ()
    entries = ledger.entries()
    assert len({e.created_at for e in entries}) == 1  # one transaction
    assert ledger.spent(0, "a").amount == ledger.spent(0, "b").amount == Fraction(3, 10)
    assert ledger.verify().ok


def test_a_refusal_in_a_round_records_nothing(store: StoreUnderTest) -> None:
    ledger = store.open(PER_METRIC)
    ledger.release(req("loss", "a"), 30.0)
    before = (len(ledger), ledger.head())
    with pytest.raises(BudgetExceeded):  # loss already used its allocation in region a
        ledger.release_round(round_of(("hist5", "loss")))
    assert (len(ledger), ledger.head()) == before
    too_small = ReleaseRequest(epoch=0, metric="loss", region="b", cohort=10)
    with pytest.raises(CohortTooSmall):
        ledger.release_round([(req("hist5", "b"), AGG["hist5"]), (too_small, 3.0)])
    assert (len(ledger), ledger.head()) == before


def test_a_partial_round_commits_what_fits_and_returns_the_refusals(
    store: StoreUnderTest,
) -> None:
    ledger = store.open(PER_METRIC)
    ledger.release(req("loss", "a"), 30.0)
    result = ledger.release_round(round_of(("hist5", "loss")), partial=True)
    kinds = [type(o).__name__ for o in result.outcomes]
    assert kinds == ["Release", "Release", "Verdict", "Release"]  # loss in a: refused
    (refused,) = result.refusals
    assert isinstance(refused, Verdict)
    assert [c.name for c in refused.failures] == ["allocation"]
    assert len(ledger) == 4
    assert ledger.verify().ok


def test_the_round_checks_each_release_against_what_the_round_already_spends(
    store: StoreUnderTest,
) -> None:
    ledger = store.open()  # pooled: ε_eval = 1 per region; big = 0.95, loss = 0.1
    result = ledger.release_round(
        [(req("big", "a"), 30.0), (req("loss", "a"), 30.0), (req("loss", "b"), 30.0)],
        partial=True,
    )
    assert isinstance(result.outcomes[1], Verdict)  # 0.95 + 0.1 > 1 within the round
    assert result.outcomes[1].failures[0].name == "budget"
    assert ledger.spent(0, "a").amount == Fraction(19, 20)
    assert ledger.spent(0, "b").amount == Fraction(1, 10)


def test_a_round_is_idempotent_per_release_id(store: StoreUnderTest) -> None:
    ledger = store.open(PER_METRIC)
    items = [(req(m, r, rid=f"7/{m}/{r}"), AGG[m]) for m in ("loss", "hist5") for r in "ab"]
    first = ledger.release_round(items)
    again = store.open(PER_METRIC).release_round(items)  # the caller retries after a crash
    assert [r.entry_id for r in again.releases] == [r.entry_id for r in first.releases]
    assert [r.noisy_sum.tolist() for r in again.releases] == [
        r.noisy_sum.tolist() for r in first.releases
    ]
    assert len(ledger) == 4


def test_a_round_must_be_a_sequence_of_pairs(store: StoreUnderTest) -> None:
    ledger = store.open()
    for bad in ({"a": (req("loss", "a"), 30.0)}, [req("loss", "a")], [(1, 2)]):
        with pytest.raises(InvalidInput):
            ledger.release_round(bad)  # type: ignore[arg-type]
    assert not ledger.exists


def test_a_round_refused_on_a_new_ledger_creates_nothing(store: StoreUnderTest) -> None:
    ledger = store.open()  # pooled: big (0.95) then loss (0.1) cannot both fit
    with pytest.raises(BudgetExceeded):
        ledger.release_round([(req("big", "a"), 30.0), (req("loss", "a"), 30.0)])
    assert not ledger.exists
    result = ledger.release_round([(req("big", "a"), 30.0), (req("loss", "a"), 30.0)],
                                  partial=True)  # fmt: skip
    assert [type(o).__name__ for o in result.outcomes] == ["Release", "Verdict"]
    assert ledger.exists


def test_one_release_id_twice_in_a_round_is_one_release_or_a_conflict(
    store: StoreUnderTest,
) -> None:
    ledger = store.open()
    twin = (req("loss", "a", rid="t"), 30.0)
    result = ledger.release_round([twin, twin, (req("loss", "b"), 30.0)])
    first, again, _ = result.releases
    assert first.entry_id == again.entry_id == 1
    assert len(ledger) == 2
    assert ledger.spent(0, "a").amount == Fraction(1, 10)
    with pytest.raises(ReleaseIdConflict):
        ledger.release_round([(req("loss", "a", rid="u"), 30.0), (req("loss", "b", rid="u"), 30.0)])
    assert len(ledger) == 2


def test_a_partial_round_returns_a_release_id_conflict_as_its_verdict(
    store: StoreUnderTest,
) -> None:
    """``partial=True`` returns every refused request as its Verdict: a reused release id
    (within the call, or of a recorded release) aborted the whole round (audit 2, 9)."""
    ledger = store.open()
    ledger.release(req("loss", "a", rid="old"), 30.0)
    items = [
        (req("loss", "a", rid="u"), 30.0),
        (req("loss", "b", rid="u"), 30.0),  # the same id for another request
        (req("hist5", "b", rid="old"), AGG["hist5"]),  # a recorded id for another request
        (req("hist5", "a"), AGG["hist5"]),
    ]
    result = ledger.release_round(items, partial=True)
    kinds = [type(o).__name__ for o in result.outcomes]
    assert kinds == ["Release", "Verdict", "Verdict", "Release"]
    for refused in result.refusals:
        assert [c.name for c in refused.failures] == ["release_id"]
    assert len(ledger) == 3
    with pytest.raises(ReleaseIdConflict):  # all or nothing: the same round raises
        store.open().release_round(items[1:3])
    assert len(ledger) == 3


@pytest.mark.parametrize("partial", [1, 0, "yes", None, np.bool_(True)])
def test_partial_must_be_a_real_bool(store: StoreUnderTest, partial: object) -> None:
    ledger = store.open(PER_METRIC)
    with pytest.raises(InvalidInput, match="partial must be True or False"):
        ledger.release_round(round_of(("loss",)), partial=partial)  # type: ignore[arg-type]
    assert len(ledger) == 0


def test_a_partial_round_refused_whole_writes_nothing(store: StoreUnderTest) -> None:
    """Audit 5, F7: a partial round whose every request was refused under the lock (here:
    epoch 0 is bound to version 1) still committed the opening policy's row."""
    store.open().release(req("loss", "a"), 30.0)
    text = CONTRACT_POLICY.replace('version = "1"', 'version = "2"')
    v2 = Policy.from_toml(text.replace('epoch_epsilon = "4"', 'epoch_epsilon = "5"'))
    ledger = store.open(v2)
    count = "SELECT count(*) FROM dpl_policies"
    before = (store.raw(count), ledger.head(), len(ledger))
    files = _files(store)
    result = ledger.release_round(round_of(("loss", "hist5")), partial=True)
    assert result.releases == ()
    assert len(result.refusals) == 4
    assert (store.raw(count), ledger.head(), len(ledger)) == before
    assert _files(store) == files
    ledger.release(req("loss", "a", epoch=1), 30.0)  # a release that commits records it
    assert store.raw(count) == [(2,)]


def _files(store: StoreUnderTest) -> dict[str, bytes]:
    """The SQLite ledger's file and log, byte for byte ({} on PostgreSQL)."""
    if store.kind != "sqlite":
        return {}
    from pathlib import Path

    return {s: Path(store.target + s).read_bytes() for s in ("", "-wal")
            if Path(store.target + s).exists()}  # fmt: skip


@pytest.mark.parametrize("committed", [0, 1])
def test_an_all_or_nothing_refusal_tells_committed_from_staged_spend(
    store: StoreUnderTest, committed: int
) -> None:
    """Review P2: the round's own uncommitted requests were reported as spent ("spent 1/5,
    remaining 4/5" with 1/10 committed). Now the error's spent and remaining are the
    ledger's, staged is the round's, and it names the refused request and its id."""
    ledger = store.open()  # pooled: ε_eval = 1 per region; big = 0.95, loss = 0.1
    if committed:
        ledger.release(req("loss", "a"), 30.0)
    before = (ledger.spent(0, "a"), len(ledger))
    items = [(req("loss", "a", rid="l"), 30.0), (req("loss", "b"), 30.0),
             (req("big", "a", rid="big-1"), 30.0)]  # fmt: skip
    with pytest.raises(BudgetExceeded) as refused:
        ledger.release_round(items)
    e = refused.value
    assert (e.requested.amount, e.staged.amount) == (Fraction(19, 20), Fraction(1, 10))
    assert (e.spent.amount, e.remaining.amount) == (
        Fraction(committed, 10),
        1 - Fraction(committed, 10),
    )
    assert (e.index, e.release_id, e.scope) == (2, "big-1", "epoch 0, region a")
    text = str(e)
    assert "request 2 of the round (from 0) (release id 'big-1')" in text
    assert f"stage 1/10 of the budget on top of {Fraction(committed, 10)} committed" in text
    assert "spent 1/5" not in text
    assert "nothing is recorded" in text
    assert (ledger.spent(0, "a"), len(ledger)) == before
    partial = ledger.release_round(items, partial=True).refusals[0]
    assert "they are recorded, this one is not" in partial.failures[0].reason
