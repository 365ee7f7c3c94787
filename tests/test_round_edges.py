"""Rounds at their edges (review s33): a round too large for one PostgreSQL statement, a
release id taken by another writer while a partial round waited for the lock, release ids
that skipped validation, and the same id twice in one round."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from _stores import StoreUnderTest

from benchmarks.rounds import round_items, round_policy
from dpledger import ReleaseIdConflict, ReleaseRequest, Verdict
from dpledger.errors import InvalidInput
from dpledger.ledger import Ledger, pgwrite
from dpledger.ledger import writer as writer_module

POLICY = round_policy()  # five metrics in four regions, 1,000 releases of each per epoch


def loss(region: str, rid: str | None = None) -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric="loss", region=region, cohort=2400, release_id=rid)


def coverage(region: str, rid: str | None = None) -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric="coverage", region=region, cohort=2400,
                          edges_version="coverage-cells/v1", release_id=rid)  # fmt: skip


def test_a_round_split_across_statements_is_one_transaction(
    store: StoreUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL a round's rows go in statements of at most STATEMENT_PARAMETERS
    parameters (here three entries, or 14 spend totals, a statement; the head's two ride
    in the last), all sent with the one COMMIT; SQLite writes row by row. Every entry is
    recorded, chained and charged once."""
    monkeypatch.setattr(pgwrite, "STATEMENT_PARAMETERS", 3 * 19 + 2)
    sent: list[int] = []
    commit = pgwrite.PipelinedWrites._pipelined_commit

    def counted(self: pgwrite.PipelinedWrites, writes: Any) -> None:
        sent.append(len(writes))
        commit(self, writes)

    monkeypatch.setattr(pgwrite.PipelinedWrites, "_pipelined_commit", counted)
    ledger = store.open(POLICY)
    items = [(loss(f"r{k % 4}"), 1000.0) for k in range(10)]
    items += round_items(POLICY, 0)  # every metric in every region: 20 spend totals
    result = ledger.release_round(items)
    # 30 entries in 10 statements, 20 totals in 2 alone (3 entries and 6 totals are over
    # the cap), the head with the last entries: 12
    assert sent == ([12] if store.kind == "postgres" else [])
    assert [r.entry_id for r in result.releases] == list(range(1, 31))
    assert len(ledger) == 30
    assert ledger.head()[0] == 30
    assert ledger.verify().ok
    eps = {m: POLICY.metric(m).epsilon for m in POLICY.metrics}
    assert ledger.spent(0, "r1").amount == 3 * eps["loss"] + sum(eps.values())
    assert ledger.spent(0, "r3").amount == 2 * eps["loss"] + sum(eps.values())


@pytest.mark.parametrize(
    ("entries", "totals"),
    [(1, 1), (20, 20), (1684, 1), (1683, 8000), (8420, 8000), (1, 20000), (5000, 16000)],
)
def test_no_statement_carries_more_than_its_cap(entries: int, totals: int) -> None:
    """Every statement of a round's write, the last (with the head) included, carries at
    most STATEMENT_PARAMETERS parameters, numbered $1..$n as its parameters are."""

    class Held(pgwrite.PipelinedWrites):
        def __init__(self) -> None:
            self._pending = []
            self._in_txn = True

    held = Held()
    held._write_rows([tuple(range(19))] * entries, [(0, "r0", "loss", "1")] * totals, (1, "h"))
    for sql, params in held._pending:
        assert len(params) <= pgwrite.STATEMENT_PARAMETERS
        assert max(int(n) for n in re.findall(r"\$(\d+)", sql)) == len(params)
    assert sum(len(p) for _, p in held._pending) == 19 * entries + 4 * totals + 2


@pytest.mark.postgres
def test_a_postgres_round_beyond_one_statements_parameters(pg_url: str) -> None:
    """3,450 entries x 19 columns is over PostgreSQL's 65,535 parameters a statement: the
    round is still recorded, in one transaction (before: refused as a failed COMMIT)."""
    with Ledger.open(pg_url, POLICY, mode="create") as ledger:
        items = [(loss(f"r{k % 4}"), 1000.0) for k in range(3450)]
        assert len(ledger.release_round(items).releases) == 3450
        assert len(ledger) == 3450
        assert ledger.verify().ok


def test_a_partial_round_returns_a_conflict_found_under_the_lock(
    store: StoreUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer takes a release id after the round looked it up and before the round
    holds the lock: with ``partial=True`` that item comes back as its refused verdict and
    the rest commit (before: the whole round raised ReleaseIdConflict)."""
    ours, theirs = store.open(POLICY), store.open(POLICY)
    ours.init()
    look_up = writer_module.Writer._retries

    def look_up_then_race(self: writer_module.Writer, *args: object) -> object:
        out = look_up(self, *args)  # type: ignore[arg-type]  # found nothing under "shared"
        monkeypatch.setattr(writer_module.Writer, "_retries", look_up)
        theirs.release(coverage("r0", rid="shared"), np.zeros(6), principal="bob")
        return out

    monkeypatch.setattr(writer_module.Writer, "_retries", look_up_then_race)
    items = [(loss("r1"), 1000.0), (coverage("r2", rid="shared"), np.zeros(6))]
    result = ours.release_round(items, partial=True, principal="alice")
    assert [type(o).__name__ for o in result.outcomes] == ["Release", "Verdict"]
    (refused,) = result.refusals
    assert isinstance(refused, Verdict)
    assert [c.name for c in refused.failures] == ["release_id"]
    assert [(e.draft.metric, e.draft.principal) for e in ours.entries()] == [
        ("coverage", "bob"),
        ("loss", "alice"),
    ]
    assert ours.verify().ok


@pytest.mark.parametrize("rid", ["a b", "é", "x" * 129, "", "line\nbreak", "nul\x00byte"])
def test_a_release_id_that_skipped_validation_is_refused(store: StoreUnderTest, rid: str) -> None:
    """A request built with ``model_construct`` meets the same release-id rule as one built
    normally: InvalidInput naming release_id, nothing recorded (before: any text was
    recorded, and a NUL byte's retry failed with a constraint error)."""
    ledger = store.open(POLICY)
    request = ReleaseRequest.model_construct(
        epoch=0, metric="loss", region="r0", cohort=2400, edges_version=None,
        policy_version=None, release_id=rid,
    )  # fmt: skip
    with pytest.raises(InvalidInput, match="release_id"):
        ledger.release_round([(request, 1000.0)])
    with pytest.raises(InvalidInput, match="release_id"):
        ledger.release(request, 1000.0)
    assert not ledger.exists


def test_the_same_id_twice_in_a_round_meets_the_retry_rule(store: StoreUnderTest) -> None:
    """Twins in one round are one release when their aggregates are as close as a retry's
    must be (float32 against float64 of one value, a rounding apart); farther apart they
    are a conflict, as in separate calls."""
    ledger = store.open(POLICY)
    close = ledger.release_round([(loss("r0", "T"), 1000.0), (loss("r0", "T"), 1000.0 + 1e-9)])
    assert [r.entry_id for r in close.releases] == [1, 1]
    typed = ledger.release_round([(loss("r1", "V"), np.float32(0.1)), (loss("r1", "V"), 0.1)])
    assert [r.entry_id for r in typed.releases] == [2, 2]
    scale = close.releases[0].scale
    far = [(loss("r2", "W"), 1000.0), (loss("r2", "W"), 1000.0 + 100 * scale)]
    with pytest.raises(ReleaseIdConflict):
        ledger.release_round(far)
    outcomes = ledger.release_round(far, partial=True).outcomes
    assert [type(o).__name__ for o in outcomes] == ["Release", "Verdict"]
    assert len(ledger) == 3
    assert ledger.verify().ok
