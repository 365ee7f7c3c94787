"""Review 40 (diff review): a12a6a1 refused invisible characters in ledger paths by
Unicode category (format characters, Cf), but the unseen characters of other categories
got through: a variation selector (``L.db\\ufe0f``, Mn), a combining grapheme joiner
(U+034F), a Hangul filler (U+3164, Lo). Beside an existing ``L.db`` each was a new,
empty ledger: a release there spent a fresh budget. They are now read as the name they
look like by the twin check (as NFC/NFD forms are), so a new path that looks like an
existing file is refused (exit 2) and nothing is created; names where such a character
is meant (``❤️.db``, with no ``❤.db`` beside it) stay usable."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger.cli.main import main
from tests.factories import policy


def _release(tmp_path: Path, ledger: str) -> list[str]:
    agg = tmp_path / "agg.json"
    agg.write_text("1000.0")
    return ["release", "--policy", str(SPATIAL), "--ledger", ledger, "--epoch", "0",
            "--metric", "clipped_mean_loss", "--region", "na", "--cohort", "3000",
            "--aggregate", str(agg)]  # fmt: skip


@pytest.mark.parametrize("twin", ["L.db\ufe0f", "L\u034f.db", "L\u3164.db", "L.db\U000e0100"])
def test_an_unseen_twin_of_an_existing_ledger_is_refused(
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


def test_a_meant_variation_selector_stays_usable(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        p = policy()
    path = tmp_path / "\u2764\ufe0f.db"  # a red heart, emoji presentation
    with dl.Ledger.open(path, p, mode="create") as ledger:
        ledger.init()
    assert path.exists()
