"""A long-lived read handle and another process's writes (``ledger.sqlite_fresh``).

A read handle opened on a ledger nobody had open reads the file without SQLite's locks
(``immutable``: nothing is created beside it). Review s26 found that such a handle,
kept open while another process released 30 times, still counted one entry, and its
``verify`` reported the sound ledger "damaged … malformed; restore it from a backup" —
advice that, taken, would roll the budget back. Now the handle notices that the file or
its sidecars changed and reads the ledger as it is. Writers are real second processes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from factories import SPATIAL, spatial

from dpledger import Ledger, ReleaseRequest
from dpledger.errors import LedgerChanged, StoreError

AGG = np.float64(1234.5)
WRITER = """
import sys
import numpy as np
from dpledger import Ledger, Policy, ReleaseRequest
policy = Policy.load(sys.argv[2])
with Ledger.open(sys.argv[1], policy, mode="write") as ledger:
    for i in range(int(sys.argv[3]), int(sys.argv[4])):
        ledger.release(ReleaseRequest(epoch=i, metric="clipped_mean_loss",
                                      region="eu-west", cohort=2400), np.float64(1234.5))
    if len(sys.argv) > 5:  # hold the ledger open until told to close
        print("open", flush=True)
        sys.stdin.readline()
"""


def write(path: Path, start: int, stop: int) -> None:
    """Releases ``start``..``stop``-1 by another process, which then closes the ledger."""
    subprocess.run(
        [sys.executable, "-c", WRITER, str(path), str(SPATIAL), str(start), str(stop)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip


def one_release(path: Path) -> None:
    with Ledger.open(path, spatial(), mode="create") as ledger:
        ledger.release(
            ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="eu-west", cohort=2400),
            AGG,
        )


def test_a_long_lived_read_handle_sees_later_releases_and_verifies(tmp_path: Path) -> None:
    path = tmp_path / "L.db"
    one_release(path)
    with Ledger.open(path, spatial(), mode="read") as reader:
        assert len(reader.entries()) == 1
        assert reader._store._seen is not None  # type: ignore[attr-defined]  # lock-free
        for start, stop in ((1, 31), (31, 120)):
            write(path, start, stop)  # its checkpoint rewrites the file's pages
            report = reader.verify()
            assert report.ok, report.problems
            assert report.entries_checked == stop
            assert len(reader.entries()) == stop
            assert reader.spent(0) == Ledger.open(path, spatial(), mode="read").spent(0)
    assert {p.name for p in tmp_path.iterdir()} == {"L.db"}  # nothing made beside it


def test_a_read_handle_reads_through_a_writer_that_holds_the_ledger(tmp_path: Path) -> None:
    path = tmp_path / "L.db"
    one_release(path)
    reader = Ledger.open(path, spatial(), mode="read")
    held = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(SPATIAL), "1", "4", "hold"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert held.stdout is not None
        assert held.stdout.readline() == "open\n"
        assert len(reader.entries()) == 4  # its -wal, through SQLite's read locks
        assert reader._store._seen is None  # type: ignore[attr-defined]
        assert reader.verify().ok
    finally:
        held.communicate("\n", timeout=60)
    assert held.returncode == 0
    assert len(reader.entries()) == 4
    reader.close()


def test_a_file_damaged_under_a_read_handle_is_still_reported(tmp_path: Path) -> None:
    path = tmp_path / "L.db"
    one_release(path)
    write(path, 1, 40)
    with Ledger.open(path, spatial(), mode="read") as reader:
        assert len(reader.entries()) == 40
        data = bytearray(path.read_bytes())
        data[4096:8192] = b"\xa5" * 4096  # page 2 overwritten: real damage
        path.write_bytes(bytes(data))
        report = reader.verify()
        assert not report.ok
        assert any("damaged" in p or "malformed" in p for p in report.problems), report.problems
        assert not any("nothing is wrong" in p for p in report.problems)


def test_a_snapshot_that_another_process_changed_is_read_again_not_mixed(
    tmp_path: Path,
) -> None:
    """Inside one snapshot the handle cannot re-read: a change under it is LedgerChanged
    (a StoreError saying nothing is wrong), never a mix of two states."""
    path = tmp_path / "L.db"
    one_release(path)
    with Ledger.open(path, spatial(), mode="read") as reader:
        store = reader._store  # type: ignore[attr-defined]

        def read_across_a_write() -> None:
            with store.snapshot():
                assert store.count() == 1
                write(path, 1, 20)
                assert store.count() == 1  # the snapshot's connection, pinned

        with pytest.raises(LedgerChanged, match="nothing is wrong with it"):
            read_across_a_write()
        assert store.count() == 20


def test_a_ledger_that_keeps_changing_gives_no_verdict_not_a_failed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review s27: after its retries verify put LedgerChanged in its problems, and the CLI
    printed FAILED (exit 1) for a sound ledger another process kept writing."""
    from dpledger.ledger import audit
    from dpledger.ledger.sqlite import SqliteStore

    path = tmp_path / "L.db"
    one_release(path)
    monkeypatch.setattr(audit.time, "sleep", lambda s: None)
    with Ledger.open(path, spatial(), mode="read") as reader:
        monkeypatch.setattr(SqliteStore, "_stale", lambda self: self._reading > 0)
        with pytest.raises(LedgerChanged):
            reader.verify()
        monkeypatch.undo()
        assert reader.verify().ok


def test_another_ledger_moved_over_the_path_is_refused_not_read(tmp_path: Path) -> None:
    """Review s27, M3: the handle followed its path to another policy's ledger."""
    from factories import policy

    path, other = tmp_path / "L.db", tmp_path / "other.db"
    one_release(path)
    with Ledger.open(other, policy(), mode="create") as made:
        assert made.init()
    with Ledger.open(path, spatial(), mode="read") as reader:
        assert len(reader.entries()) == 1
        other.replace(path)
        for _ in range(2):  # and it stays refused
            with pytest.raises(StoreError, match="is now another ledger"):
                reader.entries()


def test_an_older_copy_moved_over_the_path_is_refused_not_a_rollback(tmp_path: Path) -> None:
    """Review s27b, M2: a backup of the same ledger, older than what the handle had read,
    moved over the path was followed: the handle's entries went from 3 back to 1 and
    verify said ok — a budget rolled back. A later state of the same ledger is read."""
    import shutil

    path, backup = tmp_path / "L.db", tmp_path / "backup.db"
    one_release(path)
    shutil.copyfile(path, backup)
    write(path, 1, 3)
    with Ledger.open(path, spatial(), mode="read") as reader:
        assert len(reader.entries()) == 3
        write(path, 3, 5)  # the same ledger, grown: followed
        assert len(reader.entries()) == 5
        backup.replace(path)
        with pytest.raises(StoreError, match="does not hold entry 5"):
            reader.entries()
        with pytest.raises(StoreError, match="open it anew"):
            reader.verify()
