"""Review 40 (diff 3): the path check lets a zero-width joiner or non-joiner (and the
Mongolian vowel separator) through anywhere but at the ends of the whole path text (they
sit inside words: Persian, Indic scripts, emoji sequences), but the twin check's skeleton
kept them. So ``L\\u200d.db`` (inside the name) and ``./\\u200dL.db`` (at the start of the
name, not of the text) were each a new, empty ledger beside ``L.db``, with a fresh budget:
the twin c795751 refuses for a variation selector. The skeleton now drops them too; a
name with a joiner and no twin beside it stays usable. Deterministic."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger.cli.main import main


def _release(tmp_path: Path, ledger: str) -> list[str]:
    agg = tmp_path / "agg.json"
    agg.write_text("1000.0")
    return ["release", "--policy", str(SPATIAL), "--ledger", ledger, "--epoch", "0",
            "--metric", "clipped_mean_loss", "--region", "na", "--cohort", "3000",
            "--aggregate", str(agg)]  # fmt: skip


@pytest.mark.parametrize("twin", ["L\u200d.db", "./\u200cL.db", "L\u180e.db"])
def test_a_joiner_twin_of_an_existing_ledger_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    twin: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, "L.db")) == 0
    capsys.readouterr()
    assert main(_release(tmp_path, twin)) == 2
    assert "other Unicode characters" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L.db", "agg.json"]


@pytest.mark.parametrize(
    "name",
    ["\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645.db",  # Persian, a ZWNJ inside a word
     "\U0001f468\u200d\U0001f469\u200d\U0001f467.db",  # an emoji family (ZWJ sequence)
     "\u0915\u094d\u200d\u0937.db"],  # Devanagari half form
)  # fmt: skip
def test_a_name_with_a_joiner_and_no_twin_stays_usable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "other.db").write_bytes(b"")
    assert main(_release(tmp_path, name)) == 0
    assert (tmp_path / name).exists()
