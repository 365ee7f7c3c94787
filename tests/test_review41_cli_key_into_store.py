"""``dpledger keys create … >> L.keys.db``: the new key written into its own key store
(review 41).

Review 40 refused a command whose standard output or error is redirected into the
database it uses, checking ``--ledger`` and ``--keys``. ``keys create``, ``keys list``
and ``serve`` without ``--keys`` use the ledger's default key store, ``L.keys.db``,
which was not checked: ``keys create --ledger L.db >> L.keys.db`` appended the new key
— the secret, which the store is meant to hold only as a salted digest — in clear text
to the key store file (past SQLite's last page, until a later page overwrites it). Now
the default store is checked too: refused (exit 2) before anything is opened, the store
byte-identical, no key created.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from factories import SPATIAL

REPO = Path(__file__).resolve().parents[1]


def _run(argv: list[str], **streams: object) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "dpledger.cli", *argv]
    return subprocess.run(cmd, env=env, check=False, timeout=120, **streams)  # type: ignore[call-overload, no-any-return]


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_redirected_into_the_default_key_store_is_refused(
    tmp_path: Path, stream: str
) -> None:
    ledger, store = tmp_path / "L.db", tmp_path / "L.keys.db"
    assert (
        _run(["ledger", "init", "--policy", str(SPATIAL), "--ledger", str(ledger)]).returncode == 0
    )
    create = ["keys", "create", "--ledger", str(ledger), "--action", "read", "--name"]
    assert _run([*create, "first"], capture_output=True).returncode == 0
    before = store.read_bytes()
    with store.open("ab") as into:
        r = _run([*create, "second"], **{stream: into})
    assert r.returncode == 2
    assert store.read_bytes() == before  # no secret, no new key
    listed = _run(["keys", "list", "--ledger", str(ledger)], capture_output=True)
    assert b"second" not in listed.stdout
