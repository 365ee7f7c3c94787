"""A writing command pointed at another application's SQLite database (review 39).

``dpledger release --ledger app.db`` (or ``ledger init``, ``ledger migrate``) refuses a
database that is not a ledger (exit 2, "no dpl_meta table"). It decided so only after
opening it read-write: when ``app.db`` had a WAL its own writer had not checkpointed (a
crashed or running application), SQLite recovered that WAL, and closing the refused
connection checkpointed it into ``app.db`` and deleted ``app.db-wal`` and ``app.db-shm``:
a refusal rewrote a file that is not dpledger's and deleted two it did not create. A
write now looks first the way a read does (nothing written), and refuses a database
without the ledger's tables before SQLite may write anything.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from factories import SPATIAL, spatial

from dpledger import Ledger
from dpledger.cli.main import main
from dpledger.errors import NotALedger
from dpledger.ledger.migrate import migrate

_APP = """
import os, signal, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA journal_mode=WAL")
c.execute("PRAGMA wal_autocheckpoint=0")
c.execute("CREATE TABLE t (x)")
for i in range(50):
    c.execute("INSERT INTO t VALUES (?)", (i,))
os.kill(os.getpid(), signal.SIGKILL)  # its commits are in app.db-wal only
"""


_JOURNAL_APP = """
import os, signal, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("CREATE TABLE t (x)")
c.execute("PRAGMA cache_size=1")
c.execute("BEGIN IMMEDIATE")
for i in range(300):
    c.execute("INSERT INTO t VALUES (?)", ("x" * 3000,))
os.kill(os.getpid(), signal.SIGKILL)  # pages spilled into the file, the journal is hot
"""


def _app_db(d: Path, app: str = _APP, sidecar: str = "-wal") -> Path:
    """Another application's database, its writer killed leaving ``sidecar`` non-empty."""
    db = d / "app.db"
    done = subprocess.run([sys.executable, "-c", app, str(db)], check=False, timeout=60)
    assert done.returncode == -9
    assert Path(f"{db}{sidecar}").stat().st_size > 0
    return db


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.mark.parametrize("mode", ["write", "create"])
def test_opening_another_apps_wal_database_to_write_changes_nothing(
    tmp_path: Path, mode: str
) -> None:
    db = _app_db(tmp_path)
    before = _files(tmp_path)
    with pytest.raises(NotALedger, match="not a dpledger ledger"):
        Ledger.open(db, spatial(), mode=mode)  # type: ignore[arg-type]
    assert _files(tmp_path) == before
    with pytest.raises(NotALedger):
        migrate(db)
    assert _files(tmp_path) == before


def test_the_cli_refuses_another_apps_wal_database_leaving_it_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _app_db(tmp_path)
    (tmp_path / "agg.json").write_text("1000.0")
    before = _files(tmp_path)
    at = ["--policy", str(SPATIAL), "--ledger", str(db)]
    release = ["release", *at, "--epoch", "0", "--metric", "clipped_mean_loss"]
    release += ["--region", "na", "--cohort", "3000", "--aggregate", str(tmp_path / "agg.json")]
    for argv in (release, ["ledger", "init", *at], ["ledger", "migrate", *at]):
        assert main(argv) == 2
        assert "not a dpledger ledger" in capsys.readouterr().err
        assert _files(tmp_path) == before, argv


def test_a_key_store_open_to_write_refuses_another_apps_database_creating_nothing(
    tmp_path: Path,
) -> None:
    from dpledger.errors import LedgerCorrupted
    from dpledger.service.store import ServiceStore

    db = _app_db(tmp_path)
    Path(f"{db}-shm").unlink()  # a copy with its log but not the index
    before = _files(tmp_path)
    for create in (False, True):
        with pytest.raises(LedgerCorrupted, match="not a dpledger key store"):
            ServiceStore.open(str(db), create=create)
        assert _files(tmp_path) == before  # no -shm made beside it


@pytest.mark.parametrize("mode", ["write", "create"])
def test_a_foreign_database_with_a_hot_journal_is_refused_untouched(
    tmp_path: Path, mode: str
) -> None:
    """Review 39 (diff): the probe above skipped a file with a hot rollback journal, and
    the read-write open that followed rolled it back in place: the refusal rewrote
    ``app.db`` and deleted ``app.db-journal``. Such a file is now probed in a private
    copy, rolled back there, as a read does."""
    db = _app_db(tmp_path, _JOURNAL_APP, "-journal")
    before = _files(tmp_path)
    with pytest.raises(NotALedger, match="not a dpledger ledger"):
        Ledger.open(db, spatial(), mode=mode)  # type: ignore[arg-type]
    assert _files(tmp_path) == before
