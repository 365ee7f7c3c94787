"""Review 41 (migrations): backing a live ledger up, and restoring an older backup.

docs/service.md sends operators to docs/operations.md for "backups", which said only what
not to do (copy or move a ledger in use) — no way to take a backup, and no word that
restoring an older one forgets every release made after it, so the budget they spent can
be spent again, with a ledger that verifies as sound. What is shown here, and now said
in operations.md:

- SQLite's online backup (``sqlite3 L.db ".backup B.db"``, or ``VACUUM INTO``) of a
  ledger a writer holds open is a complete ledger that verifies with every release;
- a copy of ``L.db`` alone misses the releases still only in ``L.db-wal`` and still
  verifies (a sound, shorter ledger);
- a restored older backup takes the spent budget again; a head kept outside the ledger
  (``verify --expected-head``) is what catches it.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from _stores import CONTRACT, CONTRACT_POLICY

from dpledger import Ledger, ReleaseRequest
from dpledger.cli.main import main
from dpledger.errors import DpLedgerError

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "operations.md"
_WRITER = """
import sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/tests")
from _stores import CONTRACT
from dpledger import Ledger, ReleaseRequest
with Ledger.open(sys.argv[2], CONTRACT, mode="create") as ledger:
    for epoch in range(int(sys.argv[3])):
        ledger.release(ReleaseRequest(epoch=epoch, metric="loss", region="a", cohort=100), 30.0)
    print("ready", flush=True)
    sys.stdin.read()  # holds the ledger open (its commits in L.db-wal) until told to close
"""
LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)


def _entries(path: Path) -> tuple[int, bool]:
    with Ledger.open(path, CONTRACT, mode="read") as ledger:
        return len(ledger), ledger.verify().ok


def test_an_online_backup_of_a_live_ledger_is_complete_and_a_file_copy_is_not(
    tmp_path: Path,
) -> None:
    live = tmp_path / "L.db"
    argv = [sys.executable, "-c", _WRITER, str(REPO), str(live), "3"]
    writer = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"
        assert Path(f"{live}-wal").stat().st_size > 0  # the releases are in the log
        source = sqlite3.connect(f"file:{live}?mode=ro", uri=True)
        try:
            target = sqlite3.connect(tmp_path / "online.db")
            source.backup(target)  # what `sqlite3 L.db ".backup B.db"` does
            target.close()
            source.execute("VACUUM INTO ?", (str(tmp_path / "vacuumed.db"),))
        finally:
            source.close()
        shutil.copyfile(live, tmp_path / "copied.db")  # L.db alone, without its -wal
    finally:
        assert writer.stdin is not None
        writer.stdin.close()
        assert writer.wait(timeout=120) == 0
    assert _entries(tmp_path / "online.db") == (3, True)
    assert _entries(tmp_path / "vacuumed.db") == (3, True)
    assert _entries(tmp_path / "copied.db") == (0, True)  # sound, and every release lost


def test_a_restored_older_backup_spends_the_budget_again_and_an_anchor_catches_it(
    tmp_path: Path,
) -> None:
    live, backup = tmp_path / "L.db", tmp_path / "B.db"
    with Ledger.open(live, CONTRACT, mode="create") as ledger:
        ledger.release(LOSS, 30.0)
    shutil.copyfile(live, backup)  # closed: a copy is whole
    with Ledger.open(live, CONTRACT, mode="write") as ledger:
        while True:  # the rest of the allocation
            try:
                ledger.release(LOSS, 30.0)
            except DpLedgerError:
                break
        spent, anchor = ledger.spent(0, "a"), ledger.head()
    shutil.copyfile(backup, live)  # restored, every process closed
    with Ledger.open(live, CONTRACT, mode="write") as ledger:
        assert ledger.spent(0, "a") < spent
        ledger.release(LOSS, 30.0)  # approved again: the ledger cannot know
        assert ledger.verify().ok
        report = ledger.verify(expected_head=anchor)
    assert not report.ok
    policy = tmp_path / "p.toml"
    policy.write_text(CONTRACT_POLICY)
    at = ["--ledger", str(live), "--policy", str(policy)]
    assert main(["ledger", "verify", *at, "--expected-head", f"{anchor[0]}:{anchor[1]}"]) == 1


def test_operations_md_says_how_to_back_up_and_what_a_restore_forgets() -> None:
    text = " ".join(DOCS.read_text(encoding="utf-8").split())
    section = text[text.index("## Backups and copies") : text.index("## Schema migrations")]
    assert '".backup' in section
    assert "VACUUM INTO" in section
    assert "-wal" in section
    assert "spent again" in section
    assert "--expected-head" in section
