"""Review 39 (diff): a key store opened to write looks at it first through a private copy
when it has a ``-wal`` but no ``-shm`` (83d8871: ``private=True`` for every open). The
write path then reconnected read-write and overwrote the probe's copy with its own
(None) without removing it: every ``keys create``/``keys revoke``/``serve`` of such a
store left a copy of the whole key store (its session secret and key digests) in the
temporary directory. The probe's copy is removed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dpledger.service.keys import Scopes
from dpledger.service.store import ServiceStore

_HOLD = """
import os, signal, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA wal_autocheckpoint=0")
c.execute("INSERT INTO dpl_svc_meta (key, value) VALUES ('probe', 'x')")
os.kill(os.getpid(), signal.SIGKILL)  # its commit is in the -wal only
"""


def test_a_write_open_leaves_no_copy_in_the_temporary_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = tmp_path / "L.keys.db"
    with ServiceStore.open(str(keys), create=True) as store:
        store.create_key("team", Scopes(("read",), None, None))
    done = subprocess.run([sys.executable, "-c", _HOLD, str(keys)], check=False, timeout=60)
    assert done.returncode == -signal.SIGKILL
    os.remove(f"{keys}-shm")  # a -wal without its -shm: a copy of a crashed store
    assert Path(f"{keys}-wal").stat().st_size > 0
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    with ServiceStore.open(str(keys)) as store:
        assert [k.name for k in store.list_keys()] == ["team"]
    assert list(tmp.iterdir()) == []
    shutil.rmtree(tmp)
