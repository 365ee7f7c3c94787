"""Which ledger a command spends from is never implicit, throwaway or unopenable.

- ``--ledger :memory:`` (or an SQLite ``file:`` URI) spent from a fresh budget on every
  run, so a release could be repeated with new noise, recorded nowhere: refused, exit 2.
- With neither ``--ledger`` nor ``$DPLEDGER_URL``, commands silently used
  ``./dpledger.db``, a fresh full-budget ledger: now "no ledger", exit 2.
- A path that is not UTF-8 crashed (exit 3) after leaving an empty ledger file behind;
  a NUL byte was a bare ValueError in the API: both are refused before anything exists.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger.cli.main import main
from dpledger.errors import InvalidInput

RELEASE = ["--epoch", "0", "--metric", "clipped_mean_loss", "--region", "eu-west",
           "--cohort", "2400", "--aggregate", "agg.json"]  # fmt: skip
POLICY = ["--policy", str(SPATIAL)]
COMMANDS = {
    "release": ["release", *POLICY, *RELEASE],
    "check": ["check", *POLICY, *RELEASE],
    "ledger init": ["ledger", "init", *POLICY],
    "ledger show": ["ledger", "show", *POLICY],
    "ledger verify": ["ledger", "verify", *POLICY],
    "ledger export": ["ledger", "export", *POLICY, "--out", "out.jsonl"],
    "ledger lifetime": ["ledger", "lifetime", *POLICY],
    "ledger migrate": ["ledger", "migrate"],
}
SPENDING = {"demo": ["demo", "--clients", "1540", "--quiet"], "serve": ["serve", *POLICY],
            "keys list": ["keys", "list"]}  # fmt: skip


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DPLEDGER_URL", raising=False)
    (tmp_path / "agg.json").write_text("1234.5")
    return tmp_path


def files(d: Path) -> set[str]:
    return set(os.listdir(d))


@pytest.mark.parametrize("target", [":memory:", "file::memory:", "file:x.db?mode=memory"])
@pytest.mark.parametrize("command", [*COMMANDS, *SPENDING])
def test_an_in_memory_ledger_is_refused_by_every_command(
    cwd: Path, command: str, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = files(cwd)
    argv = {**COMMANDS, **SPENDING}[command]
    assert main([*argv, "--ledger", target]) == 2
    err = capsys.readouterr().err
    assert "in-memory" in err
    assert "Traceback" not in err
    assert files(cwd) == before


def test_an_in_memory_ledger_in_dpledger_url_is_refused(
    cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPLEDGER_URL", ":memory:")
    assert main(COMMANDS["release"]) == 2
    assert "in-memory" in capsys.readouterr().err


@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_ledger_given_is_an_input_error_and_creates_nothing(
    cwd: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = files(cwd)
    assert main(COMMANDS[command]) == 2
    assert "no ledger: pass --ledger" in capsys.readouterr().err
    assert files(cwd) == before  # no ./dpledger.db


def test_dpledger_url_still_names_the_ledger(
    cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPLEDGER_URL", str(cwd / "env.db"))
    assert main(COMMANDS["release"]) == 0
    assert (cwd / "env.db").exists()
    assert not (cwd / "dpledger.db").exists()
    assert main(COMMANDS["ledger verify"]) == 0


@pytest.mark.parametrize("command", ["release", "ledger init", "check"])
def test_a_ledger_path_that_is_not_utf8_is_refused_and_leaves_no_file(
    cwd: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = files(cwd)
    name = os.fsdecode(b"lat\xff.db")  # how such an argument reaches Python
    assert main([*COMMANDS[command], "--ledger", name]) == 2
    err = capsys.readouterr().err
    assert "not valid UTF-8" in err
    assert "internal error" not in err
    assert files(cwd) == before


@pytest.mark.parametrize("name", ["a\x00b.db", os.fsdecode(b"lat\xff.db")])
def test_the_api_refuses_an_unopenable_path_before_creating_anything(cwd: Path, name: str) -> None:
    policy = dl.Policy.load(SPATIAL)
    request = dl.ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="eu-west", cohort=2400)
    with (
        pytest.raises(InvalidInput, match=r"NUL byte|not valid UTF-8"),
        dl.Ledger.open(name, policy, mode="create") as ledger,
    ):
        ledger.release(request, 1234.5)
    assert files(cwd) == {"agg.json"}


@pytest.mark.parametrize("target", [":memory:", "file:keys.db"])
@pytest.mark.parametrize(
    "argv",
    [["keys", "create", "--name", "a", "--action", "read"], ["keys", "list"],
     ["keys", "revoke", "abc"], ["serve", *POLICY]],
    ids=["create", "list", "revoke", "serve"],
)  # fmt: skip
def test_an_in_memory_key_store_is_refused(
    cwd: Path, argv: list[str], target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``keys create --keys :memory:`` printed a key that no service could ever read (and
    left a file named ':memory:'); ``--keys`` takes the ledger's rule."""
    assert main(["ledger", "init", *POLICY, "--ledger", "l.db"]) == 0
    before = {n: (cwd / n).read_bytes() for n in files(cwd)}
    assert main([*argv, "--ledger", "l.db", "--keys", target]) == 2
    err = capsys.readouterr().err
    assert "--keys" in err
    assert "in-memory" in err
    assert "Traceback" not in err
    assert {n: (cwd / n).read_bytes() for n in files(cwd)} == before


def test_keys_create_without_a_ledger_is_an_input_error(
    cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It raised AttributeError (exit 3): the scope names were checked against a ledger
    before the missing --ledger was named (review s24)."""
    argv = ["keys", "create", "--keys", "k.db", "--name", "a", "--action", "read"]
    assert main(argv) == 2
    assert "no ledger: pass --ledger" in capsys.readouterr().err
    assert not (cwd / "k.db").exists()
