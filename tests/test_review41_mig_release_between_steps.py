"""Review 41 (migrations): a release between two steps of one migration.

A schema-1 ledger goes to 2, 3, then 4, one transaction each, and dpledger reads and
writes a schema-2 or -3 ledger as it is: a writer (the service, a round) may append as
soon as the first step commits. Each later step was refused when the chain head had
moved since the migration *began* — "changed while it was being migrated …: nothing was
changed; migrate again" — though the first step had committed (the ledger was left at
schema 2), and steps 2→3 and 3→4 change no row, so an appended entry is no reason to
refuse them. Each step now checks the head as it is when it starts.
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


def test_a_release_between_migration_steps_does_not_refuse_the_next_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v1.db"
    shutil.copyfile(FIXTURE, path)
    first_step = SqliteStore.upgrade_schema_1

    def then_a_release(store: SqliteStore, *args: Any) -> None:
        first_step(store, *args)
        with Ledger.open(path, second_policy(), mode="write") as writer:  # schema 2: writable
            request = ReleaseRequest(epoch=2, metric="clipped_mean_loss", region="na",
                                     cohort=3000, release_id="between")  # fmt: skip
            assert writer.release(request, 3000.0).entry_id == 8

    monkeypatch.setattr(SqliteStore, "upgrade_schema_1", then_a_release)
    done = migrate(path)
    assert (done.from_version, done.to_version, done.entries) == ("1", "4", 8)
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT value FROM dpl_meta WHERE key = 'schema_version'")
        assert version.fetchone() == ("4",)
    with Ledger.open(path, second_policy(), mode="read") as ledger:
        assert ledger.verify(expected_head=V1_HEAD).ok
        assert ledger.head() == done.head
        assert [e.draft.release_id for e in ledger.entries()][-1] == "between"
