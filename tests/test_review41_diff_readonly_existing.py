"""Writing an EXISTING ledger or key store on a read-only file system (review 41, diff
review).

Review 41 named the read-only file system when a ledger or key store is *created* there.
One step to the side, a write to one that exists (``release``, ``ledger migrate``,
``keys create``/``revoke``) still said "is not writable by this user (uid 0) … run as a
user who may write them, grant that permission": for root, on a read-only mount, no user
and no permission would help. It now names the read-only file system (exit 2, nothing
opened or changed); reading it is unaffected.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from _mounts import cli as _cli
from _mounts import read_only_bind
from factories import SPATIAL

from dpledger import _creating, _sqlite_files
from dpledger.errors import StoreError


def test_check_writable_names_a_read_only_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "L.db"
    ledger.write_bytes(b"")
    real = os.statvfs

    def statvfs(p: str | os.PathLike[str]) -> object:
        st = real(p)
        return SimpleNamespace(f_flag=st.f_flag | os.ST_RDONLY)

    monkeypatch.setattr(_creating.os, "statvfs", statvfs)
    with pytest.raises(StoreError, match="read-only file system") as e:
        _sqlite_files.check_writable(ledger, "SQLite ledger")
    assert "grant that permission" not in str(e.value)


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(a writable directory, a read-only bind mount of it); root and ``mount`` only."""
    yield from read_only_bind(tmp_path)


def test_writing_an_existing_ledger_on_a_read_only_fs(
    read_only_dir: tuple[Path, Path], tmp_path: Path
) -> None:
    src, ro = read_only_dir
    assert (
        _cli("ledger", "init", "--policy", str(SPATIAL), "--ledger", str(src / "L.db")).returncode
        == 0
    )
    keys = ["keys", "create", "--name", "a", "--action", "read"]
    assert _cli(*keys, "--ledger", str(src / "L.db")).returncode == 0
    before = {p.name: p.read_bytes() for p in src.iterdir()}
    agg = tmp_path / "a.json"
    agg.write_text("1234.5")
    at = ["--policy", str(SPATIAL), "--ledger", str(ro / "L.db")]
    release = ["release", *at, "--epoch", "0", "--metric", "clipped_mean_loss"]
    release += ["--region", "na", "--cohort", "2400", "--aggregate", str(agg)]
    for argv in (release, [*keys, "--ledger", str(ro / "L.db")]):
        r = _cli(*argv)
        assert r.returncode == 2, r.stderr
        assert "read-only file system" in r.stderr, r.stderr
        assert "not writable by this user" not in r.stderr, r.stderr
    assert {p.name: p.read_bytes() for p in src.iterdir()} == before
    assert _cli("ledger", "show", *at).returncode == 0
