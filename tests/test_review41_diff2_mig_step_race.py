"""Review 41 diff 2: a migration finished by another one while this one waits for the
lock of its next step is done, not "nothing was changed; migrate again".

01a507a made ``migrate`` skip a step the ledger is already past, reading the schema
version as the step starts. But the step's upgrade takes the write lock only after that
read: a second migration of the same ledger (two services upgrading at deploy) that holds
the lock then, and takes the ledger on to schema 4, still left this one raising "changed
while it was being migrated (…, schema '4'): nothing was changed; migrate again" — after
its own step 1→2 had committed, with nothing left to migrate. The same holds for a
release landing in that window (a schema-3 ledger takes releases): the step's head was
read a moment before, and no entry is checked against it.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from test_migrate import FIXTURE, V1_HEAD, second_policy

from dpledger import Ledger, ReleaseRequest
from dpledger.ledger.migrate import migrate
from dpledger.ledger.sqlite import SqliteStore


def test_a_migration_finished_by_another_while_a_step_waits_for_the_lock_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v1.db"
    shutil.copyfile(FIXTURE, path)
    second_step = SqliteStore.upgrade_schema_2
    other: list[Any] = []

    def another_holds_the_lock(store: SqliteStore, *args: Any) -> None:
        monkeypatch.setattr(SqliteStore, "upgrade_schema_2", second_step)
        other.append(migrate(path))  # 2 -> 3 -> 4, after this step read the version
        second_step(store, *args)  # then this step gets the lock

    monkeypatch.setattr(SqliteStore, "upgrade_schema_2", another_holds_the_lock)
    done = migrate(path)
    assert (other[0].from_version, other[0].to_version) == ("2", "4")
    assert (done.from_version, done.to_version, done.entries) == ("1", "4", 7)
    assert done.head == V1_HEAD
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT value FROM dpl_meta WHERE key = 'schema_version'")
        assert version.fetchone() == ("4",)
    with Ledger.open(path, second_policy(), mode="read") as ledger:
        assert ledger.verify(expected_head=V1_HEAD).ok


def test_a_release_that_lands_while_a_step_waits_for_the_lock_does_not_refuse_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer holding the lock as the step asks for it commits a release first."""
    path = tmp_path / "v1.db"
    shutil.copyfile(FIXTURE, path)
    third_step = SqliteStore.upgrade_schema_3

    def a_release_holds_the_lock(store: SqliteStore, *args: Any) -> None:
        monkeypatch.setattr(SqliteStore, "upgrade_schema_3", third_step)
        with Ledger.open(path, second_policy(), mode="write") as writer:  # schema 3: writable
            request = ReleaseRequest(epoch=2, metric="clipped_mean_loss", region="na",
                                     cohort=3000, release_id="meanwhile")  # fmt: skip
            assert writer.release(request, 3000.0).entry_id == 8
        third_step(store, *args)

    monkeypatch.setattr(SqliteStore, "upgrade_schema_3", a_release_holds_the_lock)
    done = migrate(path)
    assert (done.from_version, done.to_version, done.entries) == ("1", "4", 8)
    with Ledger.open(path, second_policy(), mode="read") as ledger:
        assert ledger.verify(expected_head=V1_HEAD).ok
        assert ledger.head() == done.head
        assert [e.draft.release_id for e in ledger.entries()][-1] == "meanwhile"
