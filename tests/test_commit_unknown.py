"""A COMMIT the database did not confirm is :class:`CommitUnknown`, a ``StoreError`` that
says the release may have been recorded: ``StoreError`` alone promises the release did not
happen. A retry under the request's ``release_id`` returns the recorded release, charged
once; without an id the error says to read the entries. Both stores (PostgreSQL's lost
COMMIT is in ``test_postgres_pipeline.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from factories import policy

import dpledger as dl
from dpledger.errors import CommitUnknown, StoreError
from dpledger.ledger.sqlite import SqliteStore


def _lose_the_first_commit(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first COMMIT lands and its answer is lost (an I/O error reported after it)."""
    real = SqliteStore._execute
    lost: list[str] = []

    def commit_unacknowledged(self: SqliteStore, sql: str, *args: Any) -> Any:
        out = real(self, sql, *args)
        if sql == "COMMIT" and not lost:
            lost.append(sql)
            raise StoreError(f"SQLite ledger {self.location}: disk I/O error")
        return out

    monkeypatch.setattr(SqliteStore, "_execute", commit_unacknowledged)
    return lost


def _request(release_id: str | None) -> dl.ReleaseRequest:
    region = policy().regions.names[0]
    return dl.ReleaseRequest(epoch=0, metric="loss", region=region, cohort=5000,
                             release_id=release_id)  # fmt: skip


def test_a_lost_commit_is_commit_unknown_and_its_retry_returns_the_recorded_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with dl.Ledger.open(str(tmp_path / "l.db"), policy(), mode="create") as ledger:
        ledger.init()
        lost = _lose_the_first_commit(monkeypatch)
        with pytest.raises(CommitUnknown, match="outcome is unknown") as failed:
            ledger.release(_request("r-1"), 1200.0)
        assert isinstance(failed.value, StoreError)  # callers catching StoreError still do
        assert lost == ["COMMIT"]
        assert len(ledger.entries()) == 1  # it landed: the charge is in the ledger
        again = ledger.release(_request("r-1"), 1200.0)
        assert again.retried
        assert again.entry_id == ledger.entries()[0].seq
        assert ledger.spent(0) == again.charge  # charged once
        assert ledger.verify().ok


def test_without_a_release_id_the_error_says_to_read_the_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with dl.Ledger.open(str(tmp_path / "l.db"), policy(), mode="create") as ledger:
        ledger.init()
        _lose_the_first_commit(monkeypatch)
        with pytest.raises(dl.CommitUnknown) as failed:
            ledger.release(_request(None), 1200.0)
        assert "check the ledger's entries" in str(failed.value)
        assert len(ledger.entries()) == 1


def test_a_failure_before_the_commit_is_a_plain_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(self: SqliteStore, *args: Any) -> None:
        raise StoreError(f"SQLite ledger {self.location}: database or disk is full")

    with dl.Ledger.open(str(tmp_path / "l.db"), policy(), mode="create") as ledger:
        ledger.init()
        monkeypatch.setattr(SqliteStore, "_write_rows", refused)
        with pytest.raises(StoreError, match="nothing was recorded") as failed:
            ledger.release(_request("r-1"), 1200.0)
        assert not isinstance(failed.value, CommitUnknown)
        monkeypatch.undo()
        assert ledger.entries() == []
