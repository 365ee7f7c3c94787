"""Review 39 (CLI): a ledger path with trailing whitespace started a new budget.

``DPLEDGER_URL="L.db "`` (or ``L.db\\r`` from a Windows ``.env`` file, or a stray
space in ``--ledger``) made ``dpledger release`` create a second ledger named
``"L.db "`` beside ``L.db`` and spend from its fresh, empty budget: a metric whose
epoch allocation ``L.db`` had exhausted was released again with new noise. The only
sign was "created a new ledger at L.db " on standard error, the space invisible. The
CLI refuses such a path (every command, ``--keys`` too) before anything is created.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger.cli.main import main


def _release_args(tmp_path: Path) -> list[str]:
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"epoch": 0, "metric": "clipped_mean_loss", "region": "na",
                               "cohort": 2400}))  # fmt: skip
    agg = tmp_path / "sum.json"
    agg.write_text("1200.5")
    return ["release", "--policy", str(SPATIAL), "--request", str(req), "--aggregate", str(agg)]


@pytest.mark.parametrize("suffix", [" ", "\r", "\n", "\t"])
def test_env_ledger_with_trailing_whitespace_is_refused(tmp_path, monkeypatch, capsys, suffix):
    monkeypatch.chdir(tmp_path)
    argv = _release_args(tmp_path)
    assert main([*argv, "--ledger", "L.db"]) == 0  # the one release the epoch allows
    capsys.readouterr()
    before = (tmp_path / "L.db").read_bytes()
    monkeypatch.setenv("DPLEDGER_URL", "L.db" + suffix)
    code = main(argv)  # --ledger defaults to $DPLEDGER_URL when the parser is built
    captured = capsys.readouterr()
    assert code == 2, captured.out
    assert "whitespace" in captured.err
    assert sorted(os.listdir(tmp_path)) == ["L.db", "req.json", "sum.json"]
    assert (tmp_path / "L.db").read_bytes() == before


def test_leading_space_and_keys_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main([*_release_args(tmp_path), "--ledger", " L.db", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 2
    assert out["error"] == "invalid_input"
    code = main(["keys", "list", "--ledger", "L.db", "--keys", "k.db ", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 2
    assert "--keys" in out["message"]
    assert sorted(os.listdir(tmp_path)) == ["req.json", "sum.json"]


@pytest.mark.parametrize(
    "url", ["postgresql://u:s3cret@127.0.0.1:1/db ", " postgres://u:s3cret@h/db"]
)
def test_refusal_of_a_url_never_shows_its_password(tmp_path, monkeypatch, capsys, url):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPLEDGER_URL", url)
    assert main([*_release_args(tmp_path), "--json"]) == 2
    captured = capsys.readouterr()
    assert "whitespace" in captured.err
    assert "s3cret" not in captured.err + captured.out


def test_not_utf8_url_refusal_never_shows_its_password(tmp_path, monkeypatch, capsys):
    """A --ledger URL with a byte that is not UTF-8 (``\\xff`` from a shell's $'…') was
    refused quoting it whole, password included (pre-existing, in check_path_text)."""
    monkeypatch.chdir(tmp_path)
    url = "postgresql://u:s3cret@h/db\udcff"  # how Python receives argv byte 0xff
    assert main([*_release_args(tmp_path), "--ledger", url, "--json"]) == 2
    captured = capsys.readouterr()
    assert "UTF-8" in captured.err
    assert "s3cret" not in captured.err + captured.out


@pytest.mark.parametrize("padded", ["L.db ", " L.db", "L.db\r", "L.db\n", "L\tdb"])
def test_the_library_refuses_a_padded_ledger_path_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, padded: str
) -> None:
    """Ledger.open(None, ...) reads $DPLEDGER_URL as the CLI does: the same refusal, and
    nothing created beside the ledger meant."""
    monkeypatch.chdir(tmp_path)
    policy = dl.Policy.load(str(SPATIAL))
    with pytest.raises(dl.InvalidInput, match="whitespace or holds a control character"):
        dl.Ledger.open(padded, policy, mode="create")
    monkeypatch.setenv("DPLEDGER_URL", padded)
    with pytest.raises(dl.InvalidInput, match="whitespace or holds a control character"):
        dl.Ledger.open(None, policy, mode="create")
    assert list(tmp_path.iterdir()) == []
