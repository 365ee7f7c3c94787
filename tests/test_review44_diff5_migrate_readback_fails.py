"""A migration step whose COMMIT was not confirmed, and whose read-back then failed too
(the database still out of reach, as it is when the COMMIT's answer was lost), was
raised as the read-back's plain StoreError — "nothing was recorded" — though the step may
have landed: ``_unless_unlanded`` let ``store.meta()``'s own StoreError replace the
CommitUnknown it was checking (review 44 diff 5: an unknown COMMIT classified as
nothing changed without reading the ledger).
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


def test_a_commit_unknown_whose_read_back_fails_stays_commit_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v1.db"
    shutil.copyfile(FIXTURE, path)
    before = path.read_bytes()
    real_execute, real_meta = SqliteStore._execute, SqliteStore.meta
    lost: list[str] = []

    def answer_lost(self: SqliteStore, sql: str, *args: Any) -> Any:
        out = real_execute(self, sql, *args)
        if sql == "COMMIT" and not lost:  # the first step lands, its answer is lost
            lost.append(sql)
            raise StoreError(f"SQLite ledger {self.location}: disk I/O error")
        return out

    def meta(self: SqliteStore) -> Any:
        if lost:  # the database is out of reach since the COMMIT
            raise StoreError(f"SQLite ledger {self.location}: disk I/O error; nothing was recorded")
        return real_meta(self)

    monkeypatch.setattr(SqliteStore, "_execute", answer_lost)
    monkeypatch.setattr(SqliteStore, "meta", meta)
    with pytest.raises(StoreError) as failed:
        migrate(path)
    monkeypatch.undo()
    assert path.read_bytes() != before  # the step did land
    assert isinstance(failed.value, CommitUnknown), str(failed.value)
