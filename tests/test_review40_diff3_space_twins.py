"""Review 40 (diff 3): a path check lets spaces through inside a name, and the twin check
compared names by NFC and unseen characters only, so ``my\\u00a0ledger.db`` (a no-break
space, as a path pasted from a web page, a wiki or a chat carries it) or
``my\\u202fledger.db`` (a narrow no-break space) was a new, empty ledger beside
``my ledger.db``, with a fresh budget: the three look the same, and so did the CLI's
"created a new ledger at my ledger.db". The skeleton now reads every space (but the seen
Ogham mark) as U+0020; a name with a no-break space and no twin beside it stays usable.
Deterministic."""

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


@pytest.mark.parametrize("twin", ["my\u00a0ledger.db", "my\u202fledger.db", "my\u2009ledger.db"])
def test_a_space_twin_of_an_existing_ledger_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    twin: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, "my ledger.db")) == 0
    capsys.readouterr()
    assert main(_release(tmp_path, twin)) == 2
    assert "other Unicode characters" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agg.json", "my ledger.db"]


def test_the_plain_space_twin_of_a_no_break_space_ledger_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, "my\u00a0ledger.db")) == 0  # no twin: usable
    assert main(_release(tmp_path, "my ledger.db")) == 2
    assert not (tmp_path / "my ledger.db").exists()
