"""A ledger's files as other processes and users share them (audit 4).

SQLite names a ledger's ``-wal`` and ``-shm`` after the path, creates them as whoever
opens the ledger, and applies whatever log it finds beside a name to whatever file is at
that name. Each test here has a real second process (or user) and checks that the ledger
and its sidecars are left as they were, or that no entry is lost.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from factories import SPATIAL
from test_sqlite_locks import (
    coverage_entries,
    held_elsewhere,
    other_process_releases,
    release,
)

import dpledger as dl


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "l.db"
    with dl.Ledger.open(p, dl.Policy.load(SPATIAL), mode="create") as ledger:
        ledger.init()
    return p


KILLED = """
import os, signal, sys, warnings
warnings.simplefilter("ignore")
import dpledger as dl
ledger = dl.Ledger.open(sys.argv[2], dl.Policy.load(sys.argv[1]))
def release(epoch):
    ledger.release(dl.ReleaseRequest(epoch=epoch, metric="coverage", region="na",
                   cohort=2400, edges_version="coverage-cells/v1"), [1.0] * 6)
release(0)
print("holding", flush=True)
sys.stdin.readline()
release(1)
print("committed", flush=True)
sys.stdin.readline()
os.kill(os.getpid(), signal.SIGKILL)  # no close: nothing runs after the commit
"""


def test_a_writer_killed_after_its_ledger_moved_leaves_nothing_to_replay(path: Path) -> None:
    """F-G: A holds the ledger, it is renamed, A commits and is killed; B releases through
    the new name; moved back, SQLite replayed A's frames from the old name's log over the
    file and B's two releases vanished (verify ok). Each commit now empties that log."""
    holder = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(SPATIAL), str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    moved = path.with_name("moved.db")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        os.rename(path, moved)
        holder.stdin.write("\n")  # type: ignore[union-attr]
        holder.stdin.flush()  # type: ignore[union-attr]
        assert holder.stdout.readline().strip() == "committed"
        assert Path(f"{path}-wal").stat().st_size == 0  # the commit is in moved.db alone
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == -signal.SIGKILL
    for epoch in (2, 3):
        assert other_process_releases(moved, epoch) == "released"
    os.rename(moved, path)
    assert coverage_entries(path) == 4


def as_another_user(act: Callable[[], str]) -> str:
    """What ``act`` returns (or the error it raises, as ``Type: message``) in a forked
    process running as ``nobody`` (as this user when not root: the files it is given are
    then made unwritable to this user too)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            if os.geteuid() == 0:
                nobody = pwd.getpwnam("nobody")
                os.setgroups([])
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
            said = act()
        except BaseException as e:  # reported to the parent
            said = f"{type(e).__name__}: {e}"
        os.write(write, said.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read().decode()
    os.waitpid(pid, 0)
    return said


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory like /tmp (mode 1777) that ``nobody`` can reach (tmp_path cannot be)."""
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("nobody")
        except KeyError:
            pytest.skip("running as root and there is no user 'nobody' to act as another user")
    where = Path(tempfile.mkdtemp(prefix="dpledger-shared-"))
    try:
        where.chmod(0o1777)
        yield where
    finally:
        where.chmod(0o700)
        shutil.rmtree(where)


def _open_for_writing(p: Path) -> Callable[[], str]:
    def act() -> str:
        with dl.Ledger.open(p, dl.Policy.load(SPATIAL)) as ledger:
            ledger.entries()
        return "opened"

    return act


def _files(where: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(where.iterdir())}


def test_a_user_who_cannot_write_the_ledger_is_refused_and_creates_nothing(
    shared_dir: Path,
) -> None:
    """F-A: a user who could read but not write the ledger opened it; SQLite created the
    -wal and -shm as that user, the release failed, and the owner could write no more."""
    p = shared_dir / "l.db"
    with dl.Ledger.open(p, dl.Policy.load(SPATIAL), mode="create") as ledger:
        ledger.init()
    p.chmod(0o444)
    before = _files(shared_dir)
    said = as_another_user(_open_for_writing(p))
    assert said.startswith("StoreError: "), said
    assert "not writable by this user" in said
    assert _files(shared_dir) == before  # no -wal, no -shm
    p.chmod(0o644)
    with dl.Ledger.open(p, dl.Policy.load(SPATIAL)) as ledger:  # the owner still writes
        assert ledger.verify().ok


def test_a_ledger_in_a_directory_its_user_cannot_write_is_a_store_error(
    shared_dir: Path,
) -> None:
    """F-A: a writable ledger in a read-only directory was reported LedgerCorrupted
    ("not a readable SQLite database: attempt to write a readonly database")."""
    where = shared_dir / "ro"
    where.mkdir()
    p = where / "l.db"
    with dl.Ledger.open(p, dl.Policy.load(SPATIAL), mode="create") as ledger:
        ledger.init()
    p.chmod(0o666)
    where.chmod(0o555)
    before = _files(where)
    said = as_another_user(_open_for_writing(p))
    assert said.startswith("StoreError: "), said
    assert f"the directory {where} of SQLite ledger" in said
    assert _files(where) == before


def test_a_file_moved_over_a_ledger_another_process_holds_is_refused(path: Path) -> None:
    """F-B: A holds the ledger and a backup is moved over its name; another process opened
    the backup with A's -wal and -shm, applied A's log to it and deleted the log: A's later
    releases were lost and verify said ok. Refused now, nothing opened or changed."""
    backup = path.with_name("backup.db")
    with dl.Ledger.open(backup, dl.Policy.load(SPATIAL), mode="create") as ledger:
        assert release(ledger, 0) == "released"
    with held_elsewhere(path):
        os.rename(backup, path)  # a restore over the live name
        before = _files(path.parent)
        assert {f"{path.name}-wal", f"{path.name}-shm"} <= set(before)  # A's
        for mode in ("write", "read"):
            with pytest.raises(dl.StoreError, match="not the file that another process has"):
                dl.Ledger.open(path, dl.Policy.load(SPATIAL), mode=mode)  # type: ignore[arg-type]
        assert _files(path.parent) == before
    assert coverage_entries(path) == 1  # the backup, as it was, once A is gone


def test_a_ledger_another_process_holds_still_opens_in_a_third(path: Path) -> None:
    """The probe behind F-B refuses no legitimate user: the holder locks the file too."""
    with held_elsewhere(path):
        assert other_process_releases(path, 0) == "released"
        with dl.Ledger.open(path, dl.Policy.load(SPATIAL), mode="read") as ledger:
            assert len(ledger.entries()) == 1


CRASHED = """
import os, signal, sys, warnings
warnings.simplefilter("ignore")
import dpledger as dl
ledger = dl.Ledger.open(sys.argv[2], dl.Policy.load(sys.argv[1]))
ledger.release(dl.ReleaseRequest(epoch=0, metric="coverage", region="na", cohort=2400,
               edges_version="coverage-cells/v1"), [1.0] * 6)
os.kill(os.getpid(), signal.SIGKILL)  # the entry stays in the -wal
"""


def _crashed_copy(path: Path, where: Path) -> Path:
    """A ledger whose one entry is in its -wal, copied as a backup takes it: no -shm."""
    subprocess.run([sys.executable, "-c", CRASHED, str(SPATIAL), str(path)], check=False)
    assert Path(f"{path}-wal").stat().st_size > 0
    where.mkdir(exist_ok=True)
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{path}{suffix}", where / f"l.db{suffix}")
    return where / "l.db"


def _verify(p: Path) -> Callable[[], str]:
    def act() -> str:
        with dl.Ledger.open(p, dl.Policy.load(SPATIAL), mode="read") as ledger:
            return f"{ledger.verify().ok} {len(ledger.entries())}"

    return act


def test_reading_a_ledger_with_a_log_but_no_index_creates_nothing_beside_it(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F-J: verify of such a ledger said ok but created a 32 KiB -shm beside it."""
    p = _crashed_copy(path, tmp_path / "copy")
    before = _files(p.parent)
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    assert _verify(p)() == "True 1"  # the entry in the -wal is read
    assert _files(p.parent) == before
    assert list(private.iterdir()) == []  # the private copy is gone with the handle


def test_a_ledger_with_a_log_but_no_index_verifies_in_a_read_only_directory(
    path: Path, shared_dir: Path
) -> None:
    """F-J: in a directory its reader cannot write, the same ledger was reported as a
    failed verification ("unable to open database file", exit 1)."""
    p = _crashed_copy(path, shared_dir / "ro")
    for f in p.parent.iterdir():
        f.chmod(0o444)
    p.parent.chmod(0o555)
    before = _files(p.parent)
    assert as_another_user(_verify(p)) == "True 1"
    assert _files(p.parent) == before


def test_no_usable_temporary_directory_is_a_store_error(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review s26: with no temporary directory for the private copy the read raised a bare
    FileNotFoundError (the CLI's exit 3, "internal error"); now a StoreError saying what
    to do, and nothing is created beside the ledger."""
    p = _crashed_copy(path, tmp_path / "copy")
    before = _files(p.parent)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing" / "tmp"))
    with pytest.raises(dl.StoreError, match=r"no temporary directory .* set TMPDIR"):
        _verify(p)()
    assert _files(p.parent) == before


def test_a_log_checkpointed_away_while_it_is_copied_is_read_in_place(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review s26: a writer that opened, released into and closed the ledger while its
    private copy was being made removed the -wal between the two copies, and the read
    was refused ("copying it failed: No such file or directory"). Here SQLite itself
    does that between the copies: a connection opens the file (it recovers the log into
    a new -shm) and closes (the last one: it checkpoints and removes both)."""
    import sqlite3

    from dpledger.ledger import sqlite_copy

    p = _crashed_copy(path, tmp_path / "copy")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real = shutil.copyfile
    copies: list[str] = []

    def copy_then_checkpoint(src: str, dst: str) -> str:
        out = real(src, dst)
        copies.append(str(src))
        if len(copies) == 1:  # after the file, before its -wal
            conn = sqlite3.connect(f"file:{p}?mode=rw", uri=True)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
            conn.close()
        return out

    monkeypatch.setattr(sqlite_copy.shutil, "copyfile", copy_then_checkpoint)
    assert Path(f"{p}-wal").stat().st_size > 0  # the entry is in the log until the hook runs
    assert _verify(p)() == "True 1"  # the entry, now checkpointed into the file
    assert copies == [os.path.realpath(p)]  # one copy attempt, then read in place
    assert not Path(f"{p}-wal").exists()
    assert not Path(f"{p}-shm").exists()


def test_a_log_removed_while_writability_is_checked_is_no_obstacle(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full suite's 8-process first-open race: a -wal seen beside the ledger was
    removed by another writer's close before its permission was checked, and the open
    was refused as "not writable". The removal is simulated at the check."""
    from dpledger import _sqlite_files

    wal = Path(f"{path}-wal")
    wal.write_bytes(b"")
    real = os.access

    def vanishing(p: str, mode: int, **kw: bool) -> bool:
        if p.endswith("-wal") and wal.exists():
            wal.unlink()  # another process's last close, just now
            return real(p, mode, **kw)
        return real(p, mode, **kw)

    monkeypatch.setattr(_sqlite_files.os, "access", vanishing)
    _sqlite_files.check_writable(path, "SQLite ledger")  # no StoreError
    assert not wal.exists()
