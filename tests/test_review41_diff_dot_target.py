"""``--out results/.`` and ``--plot charts/.``: the same trailing-slash defect, one step on
(review 41, diff review).

Review 41 refused an output path ending in a slash (``Path("out/")`` is ``out``: a file
was written where a directory was named). ``Path("out/.")`` is ``out`` too, and the check
looked only at the last character: ``ledger export --out results/.`` wrote a file named
``results`` and ``calibrate --plot charts/.`` a PNG named ``charts``; with ``--force``,
``--out notes.txt/.`` replaced ``notes.txt``. A path whose last component is ``.`` or
``..`` names a directory too: refused (exit 2), nothing created or replaced.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger._files import check_new
from dpledger.cli.main import main
from dpledger.errors import InvalidInput


@pytest.mark.parametrize("tail", ["/.", "/..", "/./"])
def test_check_new_refuses_a_dot_component_at_the_end(tmp_path: Path, tail: str) -> None:
    with pytest.raises(InvalidInput, match="names a directory"):
        check_new(f"{tmp_path}/charts{tail}", "--plot")


def test_export_out_ending_in_dot_writes_no_file(tmp_path: Path) -> None:
    agg = tmp_path / "a.json"
    agg.write_text("1234.5")
    at = ["--policy", str(SPATIAL), "--ledger", str(tmp_path / "L.db")]
    release = ["release", *at, "--epoch", "0", "--metric", "clipped_mean_loss"]
    assert main([*release, "--region", "na", "--cohort", "2400", "--aggregate", str(agg)]) == 0
    notes = tmp_path / "notes.txt"
    notes.write_text("keep")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["ledger", "export", *at, "--out", f"{tmp_path}/results/."]) == 2
    assert main(["ledger", "export", *at, "--out", f"{notes}/.", "--force"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert notes.read_text() == "keep"
