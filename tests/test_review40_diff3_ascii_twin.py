"""Review 40 (diff 3): the look-alike twin check skipped every new path whose name is
ASCII (a fast path), so only half of each twin pair was guarded. An existing ledger
``L.db\\ufe0f`` (a variation selector, usable when it was made: no ``L.db`` beside it) or
``\\u212a.db`` (KELVIN SIGN, whose NFC form is ``K``) and a release through the plain
``L.db`` / ``K.db`` made a new, empty ledger beside it with a fresh budget: the very twin
the README says is refused ("a new path whose name differs from an existing file's only
in its Unicode form"). The check now lists the directory for every path that does not
exist (an ASCII name there compares as itself, no normalisation). Deterministic."""

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


@pytest.mark.parametrize(("existing", "plain"), [("L.db\ufe0f", "L.db"), ("\u212a.db", "K.db")])
def test_a_plain_ascii_twin_of_an_existing_ledger_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    existing: str,
    plain: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, existing)) == 0
    capsys.readouterr()
    assert main(_release(tmp_path, plain)) == 2
    assert "other Unicode characters" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([existing, "agg.json"])


def test_a_new_ascii_ledger_beside_other_files_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Lé.db").write_bytes(b"")  # another name, not a twin
    assert main(_release(tmp_path, "L.db")) == 0
    assert (tmp_path / "L.db").exists()
