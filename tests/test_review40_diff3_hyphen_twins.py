"""Review 40 (diff 3): ``my\\u2010ledger.db`` (HYPHEN) or ``my\\u2011ledger.db``
(NON-BREAKING HYPHEN, as a word processor or a wiki page may turn the ``-`` of a pasted
path into) is drawn exactly as ``my-ledger.db``, yet was a new, empty ledger beside it,
with a fresh budget. The twin skeleton now reads both as ``-`` (the longer dashes, drawn
longer, stay distinct names). Deterministic."""

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


@pytest.mark.parametrize("twin", ["my\u2010ledger.db", "my\u2011ledger.db"])
def test_a_hyphen_twin_of_an_existing_ledger_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    twin: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, "my-ledger.db")) == 0
    capsys.readouterr()
    assert main(_release(tmp_path, twin)) == 2
    assert "other Unicode characters" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agg.json", "my-ledger.db"]


def test_an_en_dash_name_is_another_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, "my-ledger.db")) == 0
    assert main(_release(tmp_path, "my\u2013ledger.db")) == 0  # drawn longer: not a twin
