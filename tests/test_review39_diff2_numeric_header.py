"""calibrate: a CSV whose column names are numbers (years, thresholds).

Commit 804c92e refuses a CSV whose first row is all numbers (a header-less file's first
values were dropped as column names), even when --column names one of those cells
(tests/test_review39_cli_calibrate.py keeps ``--column 0.5`` refused: ambiguous). Its
message then said the file *needs a header row* — untrue of ``2023,2024``, which has
one — and gave no way to read it. The refusal stays; the message now says how
(review 39 diff2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpledger.errors import InvalidInput
from dpledger.planning.clip import load_held_out


def test_numeric_column_names_get_a_way_out(tmp_path: Path) -> None:
    p = tmp_path / "years.csv"
    p.write_text("2023,2024\n0.1,0.2\n0.3,0.4\n")
    with pytest.raises(InvalidInput, match="numeric column names a letter"):
        load_held_out(p, "2024")
