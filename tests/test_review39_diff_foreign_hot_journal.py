"""Review 39 (diff): a write pointed at another application's database with a hot journal.

91ac3d4 made a writer look at a database before opening it read-write, so that a refusal
("not a dpledger ledger") leaves another application's WAL database untouched; but its
probe (``lacks_table``) skips a file with a hot rollback journal, and the read-write open
that follows rolls that journal back in place: the refusal rewrote ``app.db`` and deleted
``app.db-journal``, a file dpledger did not create. The probe now reads such a file in a
private copy, rolled back there, as a read does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from factories import spatial

from dpledger import Ledger
from dpledger.errors import NotALedger

_APP = """
import os, signal, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("CREATE TABLE t (x)")
c.execute("PRAGMA cache_size=1")
c.execute("BEGIN IMMEDIATE")
for i in range(300):
    c.execute("INSERT INTO t VALUES (?)", ("x" * 3000,))
os.kill(os.getpid(), signal.SIGKILL)  # pages spilled into the file, the journal is hot
"""


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.mark.parametrize("mode", ["write", "create"])
def test_a_foreign_database_with_a_hot_journal_is_refused_untouched(
    tmp_path: Path, mode: str
) -> None:
    db = tmp_path / "app.db"
    done = subprocess.run([sys.executable, "-c", _APP, str(db)], check=False, timeout=60)
    assert done.returncode == -9
    assert Path(f"{db}-journal").stat().st_size > 0
    before = _files(tmp_path)
    with pytest.raises(NotALedger, match="not a dpledger ledger"):
        Ledger.open(db, spatial(), mode=mode)  # type: ignore[arg-type]
    assert _files(tmp_path) == before
