"""A migration step whose COMMIT failed, and which ``migrate`` then read back unchanged,
was still raised as :class:`CommitUnknown` — "the spend may have been recorded … a retry
under its release_id" — for a step that wrote no spend, and that the ledger shows was not
recorded (review 44 diff 4: a CommitUnknown where nothing was recorded).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from dpledger.errors import CommitUnknown, StoreError
from dpledger.ledger.migrate import migrate
from dpledger.ledger.sqlite import SqliteStore

FIXTURE = Path(__file__).parent / "data" / "ledger-v1.db"


def test_a_step_whose_commit_failed_and_did_not_land_is_a_plain_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v1.db"
    shutil.copyfile(FIXTURE, path)
    before = path.read_bytes()
    real = SqliteStore._execute

    def commit_fails(self: SqliteStore, sql: str, *args: Any) -> Any:
        if sql == "COMMIT":  # refused before it ran: rolled back, nothing recorded
            raise StoreError(f"SQLite ledger {self.location}: disk I/O error")
        return real(self, sql, *args)

    monkeypatch.setattr(SqliteStore, "_execute", commit_fails)
    with pytest.raises(StoreError) as failed:
        migrate(path)
    monkeypatch.undo()
    assert path.read_bytes() == before  # nothing was recorded, and migrate read so
    assert not isinstance(failed.value, CommitUnknown), str(failed.value)
    assert "spend" not in str(failed.value)
    assert "nothing was changed" in str(failed.value)


def test_a_step_whose_commit_landed_unseen_stays_commit_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v1.db"
    shutil.copyfile(FIXTURE, path)
    real = SqliteStore._execute
    lost: list[str] = []

    def answer_lost(self: SqliteStore, sql: str, *args: Any) -> Any:
        out = real(self, sql, *args)
        if sql == "COMMIT" and not lost:  # the first step lands, its answer is lost
            lost.append(sql)
            raise StoreError(f"SQLite ledger {self.location}: disk I/O error")
        return out

    monkeypatch.setattr(SqliteStore, "_execute", answer_lost)
    with pytest.raises(CommitUnknown):
        migrate(path)
    monkeypatch.undo()
    assert migrate(path).to_version == "4"  # migrating again finishes the job
