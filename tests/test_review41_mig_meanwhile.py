"""Review 41: a migration whose ledger moves between or during its steps.

A schema-1 ledger goes to 2, 3, then 4, one transaction each, and dpledger reads and
writes a schema-2 or -3 ledger as it is: a writer (the service, a round) may append, or a
second ``dpledger ledger migrate`` (two services upgrading at deploy) may finish the job,
as soon as the first step commits. Each case ended the first migration with "changed
while it was being migrated …: nothing was changed; migrate again" — after its own step
1→2 had committed:

- (migrations) a release between two steps: each step now checks the head as it starts;
- (diff) a second migration finishing the ledger between the steps: a step the ledger is
  already past is done;
- (diff 2) either of them landing while a step waits for the lock, after it read the
  version and head: a step refused because the ledger moved meanwhile is done again as
  the ledger now is.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_migrate import FIXTURE, V1_HEAD, second_policy

from dpledger import Ledger, ReleaseRequest
from dpledger.ledger.migrate import migrate
from dpledger.ledger.sqlite import SqliteStore

STEPS = {1: "upgrade_schema_1", 2: "upgrade_schema_2", 3: "upgrade_schema_3"}


def _release(path: Path) -> None:
    with Ledger.open(path, second_policy(), mode="write") as writer:  # schema 2, 3: writable
        request = ReleaseRequest(epoch=2, metric="clipped_mean_loss", region="na",
                                 cohort=3000, release_id="meanwhile")  # fmt: skip
        assert writer.release(request, 3000.0).entry_id == 8


@pytest.mark.parametrize(
    ("step", "before", "what"),
    [
        (1, False, "release"),  # between steps 1 and 2 (after step 1 committed)
        (1, False, "migration"),
        (2, True, "migration"),  # while step 2 waits for the lock
        (3, True, "release"),  # while step 3 waits for the lock
    ],
    ids=["release-between", "migration-between", "migration-at-lock", "release-at-lock"],
)
def test_a_ledger_moved_meanwhile_migrates_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: int, before: bool, what: str
) -> None:
    path = tmp_path / "v1.db"
    shutil.copyfile(FIXTURE, path)
    real: Callable[..., None] = getattr(SqliteStore, STEPS[step])
    other: list[Any] = []

    def meanwhile(store: SqliteStore, *args: Any) -> None:
        if not before:
            real(store, *args)
        monkeypatch.setattr(SqliteStore, STEPS[step], real)
        if what == "release":
            _release(path)
        else:
            other.append(migrate(path))  # on to 4, while this one is between or at a step
        if before:
            real(store, *args)  # then this step gets the lock

    monkeypatch.setattr(SqliteStore, STEPS[step], meanwhile)
    done = migrate(path)
    entries = 8 if what == "release" else 7
    assert (done.from_version, done.to_version, done.entries) == ("1", "4", entries)
    if what == "migration":
        assert (other[0].from_version, other[0].to_version) == ("2", "4")
        assert done.head == V1_HEAD
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT value FROM dpl_meta WHERE key = 'schema_version'")
        assert version.fetchone() == ("4",)
    with Ledger.open(path, second_policy(), mode="read") as ledger:
        assert ledger.verify(expected_head=V1_HEAD).ok
        assert ledger.head() == done.head
        if what == "release":
            assert [e.draft.release_id for e in ledger.entries()][-1] == "meanwhile"
