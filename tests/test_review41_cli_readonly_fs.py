"""Creating a ledger or key store on a read-only file system (review 41).

``dpledger ledger init`` (or a first ``release``, or ``keys create``) in a directory on a
read-only mount exited 3, "internal error: OSError: [Errno 30] Read-only file system:
'.L.db.….creating'": building the new database failed (SQLite: "unable to open database
file"), and the cleanup in ``finally`` then unlinked the temporary names it never made;
on a read-only file system ``unlink`` fails with EROFS even for a missing name, so that
OSError replaced the StoreError. Now only names that exist are removed, and the error is
exit 2 naming the read-only file system (or a missing or unwritable directory).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _mounts import cli as _cli
from _mounts import read_only_bind
from factories import SPATIAL

from dpledger import _sqlite_files
from dpledger._creating import unwritable


def test_removing_a_never_built_temporary_on_a_read_only_fs_is_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read_only(self: Path, missing_ok: bool = False) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(self))  # as Linux does

    monkeypatch.setattr(Path, "unlink", read_only)
    _sqlite_files.remove_built(tmp_path / ".L.db.1.0.0.creating")  # nothing there: no error


def test_why_a_directory_cannot_take_a_new_file(tmp_path: Path) -> None:
    assert unwritable(tmp_path / "L.db") == ""
    assert "does not exist" in unwritable(tmp_path / "no" / "L.db")


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A read-only bind mount of a directory (root and ``mount`` only; else skipped)."""
    for _, mnt in read_only_bind(tmp_path):
        yield mnt


@pytest.mark.parametrize("command", ["init", "keys"])
def test_creating_on_a_read_only_fs_is_an_input_error(read_only_dir: Path, command: str) -> None:
    ledger = read_only_dir / "L.db"
    if command == "init":
        argv = ["ledger", "init", "--policy", str(SPATIAL), "--ledger", str(ledger)]
    else:  # the ledger exists (made through the writable directory under the mount)
        made = _cli(
            "ledger",
            "init",
            "--policy",
            str(SPATIAL),
            "--ledger",
            str(read_only_dir.parent / "src" / "L.db"),
        )
        assert made.returncode == 0, made.stderr
        keys = read_only_dir / "K.db"
        argv = ["keys", "create", "--ledger", str(ledger), "--keys", str(keys)]
        argv += ["--name", "ci", "--action", "read"]
    r = _cli(*argv)
    assert r.returncode == 2, r.stderr
    assert "internal error" not in r.stderr
    assert "read-only file system" in r.stderr, r.stderr
    assert os.listdir(read_only_dir) == ([] if command == "init" else ["L.db"])
