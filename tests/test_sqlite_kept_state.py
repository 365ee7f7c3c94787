"""SQLite keeps the head and spend its last write left, and drops them when anyone else commits.

A writer's next transaction skips re-reading its own state only while ``PRAGMA
data_version`` (read under the write lock) is unchanged, i.e. no other connection has
committed since. A stale state here would be an overspend, so each test is one that a
cache without that check fails.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
from factories import policy

from dpledger import BudgetExceeded, Ledger, ReleaseRequest
from dpledger.accounting import EpochSpend
from dpledger.ledger.sqlite import SqliteStore
from dpledger.ledger.sqlite_sql import guard_spend

POLICY = policy()  # ε_eval = 1; "loss" costs 0.1, pooled: 10 releases per region per epoch
N = 100


def _release(ledger: Ledger, region: str = "north", epoch: int = 0) -> None:
    ledger.release(ReleaseRequest(epoch=epoch, metric="loss", region=region, cohort=N), 50.0)


def test_interleaved_writers_never_overspend_and_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path, POLICY, mode="create") as a:
        _release(a)  # a creates the ledger and keeps spend 0.1 and its head
        b = Ledger.open(path, POLICY, mode="write")
        for _ in range(8):
            _release(b)  # b commits: a's kept state is stale from here
        _release(a)  # the 10th: 1.0 of 1.0
        with pytest.raises(BudgetExceeded):
            _release(a)  # a stale 0.2 would approve this one
        with pytest.raises(BudgetExceeded):
            _release(b)
        for _ in range(3):  # a and b take turns on another region's budget
            _release(a, "south")
            _release(b, "south")
        assert a.spent(0, "north").amount == 1
        assert a.spent(0, "south").amount == b.spent(0, "south").amount
        report = a.verify()
        assert report.ok, report
        assert len(a.entries()) == 16
        b.close()


def test_a_commit_by_another_connection_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path, POLICY, mode="create") as a:
        _release(a)
        _release(a)  # served from the kept state: nobody else wrote
        raw = sqlite3.connect(path, isolation_level=None)
        guard_spend(raw)  # as every writing connection of dpledger
        try:  # someone else's commit (here, a spend total at the budget)
            raw.execute("UPDATE dpl_spend SET total = '1' WHERE scope = 'north'")
        finally:
            raw.close()
        with pytest.raises(BudgetExceeded):
            _release(a)


def test_the_kept_state_is_what_a_fresh_read_gives(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path, POLICY, mode="create") as a:
        for epoch in (0, 1, 0, 2, 0):
            _release(a, epoch=epoch)
        store = a._store
        assert isinstance(store, SqliteStore)
        kept = store._kept
        assert kept is not None
        fresh = SqliteStore(path, "write")
        try:
            with fresh._lock, fresh._write_transaction():
                state = fresh._load_state(sorted(kept.spend), [])
        finally:
            fresh.close()
        assert state.head == kept.head
        assert state.spend == kept.spend
        assert kept.scopes == {e: EpochSpend(t).by_scope() for e, t in state.spend.items()}


def test_the_kept_per_scope_sums_are_the_sums_of_the_kept_spend(tmp_path: Path) -> None:
    # the next transaction takes each scope's total from the kept state instead of summing
    # the (scope, metric) totals again: it must be their sum after every kind of write
    path = tmp_path / "l.db"
    checked = 0
    with Ledger.open(path, POLICY, mode="create") as a:
        store = a._store
        assert isinstance(store, SqliteStore)
        for step in range(12):
            epoch = step % 3
            with contextlib.suppress(BudgetExceeded):  # a refusal keeps nothing
                _release(a, "south", epoch=epoch + 3 * (step % 2))
            a.release_round(
                [
                    (ReleaseRequest(epoch=epoch, metric=m, region=r, cohort=N), 50.0)
                    for m in ("loss", "loss_b")
                    for r in ("north", "south", "*")[: 1 + step % 3]
                ],
                partial=True,  # late in an epoch some are refused: nothing of theirs is kept
            )
            kept = store._kept
            if kept is None:  # a round with every request refused commits nothing
                continue
            assert set(kept.scopes) == set(kept.spend)
            for e, totals in kept.spend.items():
                assert kept.scopes[e] == EpochSpend(totals).by_scope(), (step, e)
            checked += 1
    assert checked >= 8


def test_the_kept_state_holds_the_newest_epochs_and_reads_an_evicted_one_fresh(
    tmp_path: Path,
) -> None:
    from dpledger.ledger.sqlite import _KEPT_EPOCHS

    path = tmp_path / "l.db"
    epochs = _KEPT_EPOCHS + 6
    with Ledger.open(path, POLICY, mode="create") as a:
        store = a._store
        assert isinstance(store, SqliteStore)
        for epoch in range(epochs):
            _release(a, epoch=epoch)
        kept = store._kept
        assert kept is not None
        assert sorted(kept.spend) == sorted(kept.scopes) == list(range(6, epochs))
        for _ in range(9):  # epoch 0 was evicted: its 0.1 is read back, not forgotten
            _release(a, epoch=0)
        with pytest.raises(BudgetExceeded):
            _release(a, epoch=0)
        assert a.spent(0, "north").amount == 1
