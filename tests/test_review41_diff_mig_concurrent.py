"""Review 41 diff (dB): two migrations of one ledger — the second finishing it between the
first one's steps — must not end the first with "nothing was changed".

Review 41 made each step of ``migrate`` re-read the chain head as the step starts (a
release may land between steps). A second ``dpledger ledger migrate`` of the same ledger
(two services upgrading at deploy) that took it on to schema 4 after the first one's
step 1→2 had committed left the first raising "changed while it was being migrated (…,
schema '4'): nothing was changed; migrate again; nothing was recorded (rolled back)" —
its own step had changed the ledger, and there was nothing left to migrate. A step the
ledger is already past is done; any other change is still refused.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from test_migrate import FIXTURE, V1_HEAD, second_policy

from dpledger import Ledger
from dpledger.ledger.migrate import migrate
from dpledger.ledger.sqlite import SqliteStore


def test_a_migration_finished_by_another_between_steps_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v1.db"
    shutil.copyfile(FIXTURE, path)
    first_step = SqliteStore.upgrade_schema_1
    other: list[Any] = []

    def then_another_migration(store: SqliteStore, *args: Any) -> None:
        first_step(store, *args)
        monkeypatch.setattr(SqliteStore, "upgrade_schema_1", first_step)
        other.append(migrate(path))  # 2 -> 3 -> 4, while this one is between steps

    monkeypatch.setattr(SqliteStore, "upgrade_schema_1", then_another_migration)
    done = migrate(path)
    assert (other[0].from_version, other[0].to_version) == ("2", "4")
    assert (done.from_version, done.to_version, done.entries) == ("1", "4", 7)
    assert done.head == V1_HEAD
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT value FROM dpl_meta WHERE key = 'schema_version'")
        assert version.fetchone() == ("4",)
    with Ledger.open(path, second_policy(), mode="read") as ledger:
        assert ledger.verify(expected_head=V1_HEAD).ok
