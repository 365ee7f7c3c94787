"""Ctrl-C during ``dpledger keys create`` (review 41, diff review).

Review 41 revoked a new key when a Ctrl-C came before it was shown, but reused the
closed-stdout message: "it could not be written to standard output (Ctrl-C interrupted
it) … create another with standard output writable" — advice about a stream nobody
closed. And one step earlier, a Ctrl-C as the store committed the key (inside
``create_key``) printed only "dpledger: interrupted": a live key that nobody was shown,
and no word that it may exist. Now the interrupted key's message says it was interrupted
(no standard-output advice), and an interrupt whose key may have been stored says how to
find and revoke it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from factories import SPATIAL

import dpledger.cli.service as cli_service
from dpledger.cli.main import main
from dpledger.service.store import ServiceStore


def _ledger(tmp_path: Path) -> str:
    db = str(tmp_path / "L.db")
    assert main(["ledger", "init", "--policy", str(SPATIAL), "--ledger", db]) == 0
    return db


def _interrupted(*_: Any, **__: Any) -> None:
    raise KeyboardInterrupt


def test_interrupted_before_shown_gives_no_stdout_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _ledger(tmp_path)
    monkeypatch.setattr(cli_service, "write_out", _interrupted)
    create = ["keys", "create", "--ledger", db, "--name", "team", "--action", "read"]
    assert main(create) == 130
    err = capsys.readouterr().err
    assert "revoked" in err, err
    assert "interrupted" in err, err
    assert "standard output writable" not in err, err


def test_interrupted_as_the_key_is_stored_says_it_may_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _ledger(tmp_path)
    capsys.readouterr()
    real = ServiceStore.create_key

    def stored_then_interrupted(self: ServiceStore, *a: Any, **k: Any) -> Any:
        real(self, *a, **k)
        raise KeyboardInterrupt

    monkeypatch.setattr(ServiceStore, "create_key", stored_then_interrupted)
    create = ["keys", "create", "--ledger", db, "--name", "team", "--action", "read"]
    assert main(create) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err, err
    assert "keys list" in err, err  # how to find it
    assert "keys revoke" in err, err  # and revoke it
