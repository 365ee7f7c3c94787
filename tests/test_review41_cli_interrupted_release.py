"""Ctrl-C (SIGINT) during ``dpledger release`` after the ε was spent (review 41).

``main`` turned a KeyboardInterrupt into exit 130 and said nothing at all. Pressed after
the release was committed — while its value was being printed, or as the ledger call
returned — the ε was spent, the value was recorded, and the operator saw neither (nor
any hint that something was committed): a rerun spent the budget again with new noise.
Now the command says on standard error what was committed and how to read it back (as
when standard output is closed), and an interrupt whose outcome is unknown says how to
find out before retrying. Exit 130 either way (the shell's code for Ctrl-C).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from factories import SPATIAL, spatial

import dpledger.cli.main as cli_main
from dpledger import Ledger
from dpledger.cli import run
from dpledger.cli.main import main

RELEASE = ["--metric", "clipped_mean_loss", "--region", "eu-west", "--cohort", "2400"]


def _args(tmp_path: Path, *extra: str) -> list[str]:
    agg = tmp_path / "a.json"
    agg.write_text("1234.5")
    at = ["--policy", str(SPATIAL), "--ledger", str(tmp_path / "L.db")]
    return ["release", *at, "--epoch", "0", *RELEASE, "--aggregate", str(agg), *extra]


def _entries(tmp_path: Path) -> int:
    with Ledger.open(str(tmp_path / "L.db"), spatial(), mode="read") as ledger:
        return len(list(ledger.entries()))


def test_interrupt_while_printing_a_committed_release_says_what_was_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt

    cli_main.build_parser()  # its subcommand modules import emit first: never the patch
    monkeypatch.setattr(cli_main, "emit", interrupted)
    assert main(_args(tmp_path, "--release-id", "r-1")) == 130
    err = capsys.readouterr().err
    assert _entries(tmp_path) == 1  # the ε is spent
    assert "committed a release (ε charged)" in err, err
    assert "entry 1" in err, err
    assert "value" in err, err  # the value is not lost
    assert "ledger export" in err, err
    assert "--release-id r-1" in err, err


def test_interrupt_as_the_ledger_call_returns_says_how_to_find_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = Ledger.release

    def committed_then_interrupted(self: Ledger, *a: Any, **k: Any) -> Any:
        real(self, *a, **k)
        raise KeyboardInterrupt

    monkeypatch.setattr(Ledger, "release", committed_then_interrupted)
    assert main(_args(tmp_path)) == 130
    err = capsys.readouterr().err
    assert _entries(tmp_path) == 1
    assert "interrupted" in err, err
    assert "ledger show" in err or "ledger export" in err, err  # check before a rerun


def test_interrupt_of_a_read_says_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_args(tmp_path)) == 0
    capsys.readouterr()

    def interrupted(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Ledger, "entries", interrupted)
    at = ["--policy", str(SPATIAL), "--ledger", str(tmp_path / "L.db")]
    assert main(["ledger", "show", *at]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err
    assert "committed" not in err  # a read commits nothing: no false alarm


def test_interrupt_before_a_new_key_is_shown_revokes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import dpledger.cli.service as cli_service

    assert main(_args(tmp_path)) == 0
    db = str(tmp_path / "L.db")

    def interrupted(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_service, "write_out", interrupted)
    create = ["keys", "create", "--ledger", db, "--name", "team", "--action", "read"]
    assert main(create) == 130
    err = capsys.readouterr().err
    assert "revoked at once" in err, err  # a live key nobody was shown: revoked
    monkeypatch.undo()
    assert main(["keys", "list", "--ledger", db, "--json"]) == 0
    assert '"revoked_at": null' not in capsys.readouterr().out


def test_sigterm_while_printing_a_committed_release_says_what_was_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stop 41: SIGTERM (``timeout``, a CI cancel) after the commit killed the process by
    the default handler, the value unseen and nothing said, as kill -9 does. The console
    script takes it as a Ctrl-C: the same report, exit 143; its own handler is put back."""
    before = signal.getsignal(signal.SIGTERM)

    def terminated(*_: Any, **__: Any) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # a real signal, to this process
        time.sleep(5)  # the handler raises at the next bytecode, long before this ends

    cli_main.build_parser()
    monkeypatch.setattr(cli_main, "emit", terminated)
    assert run(_args(tmp_path, "--release-id", "r-1")) == 143
    err = capsys.readouterr().err
    assert _entries(tmp_path) == 1
    assert "committed a release (ε charged)" in err, err
    assert "it was terminated" in err, err
    assert "--release-id r-1" in err, err
    assert signal.getsignal(signal.SIGTERM) == before
