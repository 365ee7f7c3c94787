"""Review 41 (migrations): a dpledger 0.1 ledger whose tables are still only in its ``-wal``.

dpledger 0.1 (schema 1) created a ledger in place, in WAL mode: until its first
checkpoint — a writer killed, or still running, before it — the file holds only its
header and every table is in ``L.db-wal``. A write handle asks first whether the file
itself has a ``dpl_meta`` table (so as not to recover another application's WAL), and
only a ledger built by a later dpledger (built, checkpointed, then linked into place)
always has. So ``dpledger ledger migrate`` said "L.db is an SQLite database but not a
dpledger ledger (no dpl_meta table); use another path for a new ledger" — advice that
abandons the ledger's spend — while ``ledger verify`` of the same file said "written by
dpledger 0.1: upgrade it with `dpledger ledger migrate`". A file whose own log holds the
ledger's tables is now taken as the ledger it is; another application's WAL database is
still refused and left untouched.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_migrate import FIXTURE, V1_HEAD, V1_SPENT, second_policy

from dpledger import Ledger
from dpledger.cli.main import main
from dpledger.errors import NotALedger
from dpledger.ledger.migrate import migrate
from dpledger.types import Budget

_KILLED_0_1 = """
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("PRAGMA wal_autocheckpoint=0")  # nothing reaches the file before the kill
conn.execute("ATTACH ? AS src", (sys.argv[2],))
conn.execute("BEGIN")
ddl = conn.execute(
    "SELECT type, name, sql FROM src.sqlite_master WHERE sql IS NOT NULL "
    "ORDER BY type = 'trigger', type = 'index'"
).fetchall()
for kind, name, sql in ddl:
    conn.execute(sql)
    if kind == "table":
        conn.execute(f"INSERT INTO main.{name} SELECT * FROM src.{name}")
conn.execute("COMMIT")
conn.execute("DETACH src")
os.kill(os.getpid(), signal.SIGKILL)
"""


def _killed_before_its_first_checkpoint(path: Path, source: Path) -> None:
    argv = [sys.executable, "-c", _KILLED_0_1, str(path), str(source)]
    assert subprocess.run(argv, check=False, timeout=120).returncode == -9
    assert Path(f"{path}-wal").stat().st_size > 0
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)  # the file alone
    try:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []
    finally:
        conn.close()


@pytest.mark.skipif(sys.platform != "linux", reason="SIGKILL and the lock probe are Linux's")
def test_a_killed_0_1_ledgers_tables_in_its_log_are_migrated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "v1.db"
    _killed_before_its_first_checkpoint(path, FIXTURE)
    assert main(["ledger", "migrate", "--ledger", str(path)]) == 0, capsys.readouterr().err
    assert "from schema 1 to 4: 7 entries kept" in capsys.readouterr().out
    done = migrate(path)
    assert (done.from_version, done.head) == ("4", V1_HEAD)
    with Ledger.open(path, second_policy(), mode="read") as ledger:
        assert ledger.verify(expected_head=V1_HEAD).ok
        for (epoch, region), spent in V1_SPENT.items():
            assert ledger.spent(epoch, region) == Budget(spent, "epsilon")


@pytest.mark.skipif(sys.platform != "linux", reason="SIGKILL and the lock probe are Linux's")
def test_another_applications_tables_in_its_log_are_still_refused_untouched(
    tmp_path: Path,
) -> None:
    source = tmp_path / "app-source.db"
    conn = sqlite3.connect(source)
    with conn:
        conn.execute("CREATE TABLE things (x)")
        conn.execute("INSERT INTO things VALUES (1)")
    conn.close()
    path = tmp_path / "app.db"
    _killed_before_its_first_checkpoint(path, source)
    before = {p.name: p.read_bytes() for p in tmp_path.glob("app.db*")}
    with pytest.raises(NotALedger):
        migrate(path)
    assert {p.name: p.read_bytes() for p in tmp_path.glob("app.db*")} == before
