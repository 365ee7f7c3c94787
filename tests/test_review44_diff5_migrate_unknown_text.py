"""A migration step whose COMMIT landed unseen raised the release path's CommitUnknown
text — "the spend may have been recorded … a request made with a release_id: a retry
under it returns the recorded release" — of a schema upgrade, which records no spend and
has no release_id: 2fb0baf fixed the text only for a step that read back unchanged
(review 44 diff 5: a half-fix; the error must say what happened and what to do).
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


def test_a_step_whose_commit_landed_unseen_says_to_migrate_again(
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
    with pytest.raises(CommitUnknown) as failed:
        migrate(path)
    monkeypatch.undo()
    text = str(failed.value)
    assert "spend" not in text, text
    assert "release_id" not in text, text
    assert "migrate again" in text, text
    assert "disk I/O error" in text, text
    assert migrate(path).to_version == "4"
