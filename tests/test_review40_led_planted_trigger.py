"""A trigger planted in a SQLite ledger passed ``verify`` and was obeyed (review 40).

``CREATE TRIGGER … BEFORE INSERT ON dpl_spend BEGIN SELECT RAISE(IGNORE); END`` (and the
same on UPDATE) changes no row, so ``ledger verify`` said "ok"; every later release
then skipped its spend update and was approved again and again past the metric's
allocation (four releases of a once-per-epoch metric). Only a verify run after the
overspend noticed. A trigger dpledger did not create, or one of its own rewritten,
now fails verify, and a writer refuses to open the ledger (exit 2, nothing written).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger.cli.main import main

_PLANTED = {
    "beside": [
        "CREATE TRIGGER zz_ins BEFORE INSERT ON dpl_spend BEGIN SELECT RAISE(IGNORE); END",
        "CREATE TRIGGER zz_upd BEFORE UPDATE ON dpl_spend BEGIN SELECT RAISE(IGNORE); END",
    ],
    "rewritten": [
        "DROP TRIGGER dpl_spend_no_replace",
        "CREATE TRIGGER dpl_spend_no_replace BEFORE INSERT ON dpl_spend "
        "BEGIN SELECT RAISE(IGNORE); END",
        "DROP TRIGGER dpl_spend_no_decrease",
        "CREATE TRIGGER dpl_spend_no_decrease BEFORE UPDATE ON dpl_spend "
        "BEGIN SELECT RAISE(IGNORE); END",
    ],
}


@pytest.mark.parametrize("how", sorted(_PLANTED))
def test_a_planted_trigger_fails_verify_and_no_release_passes_through_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    ledger = tmp_path / "L.db"
    agg = tmp_path / "agg.json"
    agg.write_text("1000.0")
    at = ["--policy", str(SPATIAL), "--ledger", str(ledger)]
    release = ["release", *at, "--epoch", "0", "--metric", "clipped_mean_loss"]
    release += ["--region", "na", "--cohort", "3000", "--aggregate", str(agg)]
    assert main(["ledger", "init", *at]) == 0
    assert main(["ledger", "verify", *at]) == 0
    capsys.readouterr()
    conn = sqlite3.connect(ledger)
    for statement in _PLANTED[how]:
        conn.execute(statement)
    conn.commit()
    conn.close()

    assert main(["ledger", "verify", *at]) == 1
    assert "did not create" in capsys.readouterr().out
    before = ledger.read_bytes()
    for _ in range(3):  # the metric allows one release per epoch
        assert main(release) == 2
        assert "did not create" in capsys.readouterr().err
    assert ledger.read_bytes() == before
