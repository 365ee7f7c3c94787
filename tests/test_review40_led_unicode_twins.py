"""Ledger paths that look alike but name another file started a fresh budget (review 40).

Review 39 refused a padded path (``L.db `` beside ``L.db``). Two more invisible
differences got through: the same name in another Unicode normal form (``Lé.db``
composed, NFC, and decomposed, NFD, as macOS writes names: two files on Linux), and an
invisible character (a zero-width space ``L.db\\u200b``, a C1 control, a bidirectional
override). ``release`` created a second ledger and released the epoch's metric again
with new noise, saying only "created a new ledger at Lé.db". Both are now refused
before anything is created (exit 2).
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger.cli.main import main


def _release(tmp_path: Path, ledger: str) -> list[str]:
    agg = tmp_path / "agg.json"
    agg.write_text("1000.0")
    return ["release", "--policy", str(SPATIAL), "--ledger", ledger, "--epoch", "0",
            "--metric", "clipped_mean_loss", "--region", "na", "--cohort", "3000",
            "--aggregate", str(agg)]  # fmt: skip


@pytest.mark.parametrize(("first", "then"), [("NFC", "NFD"), ("NFD", "NFC")])
def test_the_same_name_in_another_unicode_form_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    first: str,
    then: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    name = "Lé.db"
    assert main(_release(tmp_path, unicodedata.normalize(first, name))) == 0
    capsys.readouterr()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(_release(tmp_path, unicodedata.normalize(then, name))) == 2
    assert "other Unicode characters" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    policy = dl.Policy.load(str(SPATIAL))
    with pytest.raises(dl.InvalidInput, match="other Unicode characters"):
        dl.Ledger.open(unicodedata.normalize(then, name), policy, mode="create")


@pytest.mark.parametrize("invisible", ["\u200b", "\ufeff", "\u202e", "\x85", "\u2028"])
def test_an_invisible_character_in_a_ledger_path_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    invisible: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, "L.db")) == 0
    capsys.readouterr()
    for padded in ("L.db" + invisible, invisible + "L.db", "L" + invisible + ".db"):
        assert main(_release(tmp_path, padded)) == 2
        assert "invisible" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L.db", "agg.json"]


def test_joiners_inside_a_name_stay_usable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, "می\u200cخواهم.db")) == 0  # ZWNJ: a letter of Persian
