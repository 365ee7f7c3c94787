"""Review 39 (CLI): ``dpledger calibrate`` edge cases a careless user meets.

1. ``--plot`` with a format matplotlib cannot write (``out.txt``): the table (or the
   JSON object) was printed first, then the error, so ``--json`` printed two JSON
   objects (the result, then the error) with exit 2. The chart is now written before
   anything is printed: a failure prints only the error.
2. A CSV without a header row (``1\\n2\\n3``): its first value was read as the column's
   name and silently dropped (n=2, not 3; if it was the largest, p100 was wrong).
   A header row whose every cell is a number is refused, naming the fix (a column
   named like a number, ``2026``, beside a named one still reads).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpledger.cli.main import main
from dpledger.errors import InvalidInput
from dpledger.planning.clip import load_held_out


def test_plot_failure_prints_one_json_object(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    held = tmp_path / "h.npy"
    np.save(held, np.linspace(0.0, 4.0, 500))
    out = tmp_path / "out.txt"  # matplotlib has no "txt" format
    argv = ["calibrate", "--held-out", str(held), "--epsilon", "1", "--cohort", "200"]
    code = main([*argv, "--plot", str(out), "--json"])
    captured = capsys.readouterr()
    assert code == 2
    data = json.loads(captured.out)  # exactly one JSON value: raises "Extra data" otherwise
    assert data["error"] == "invalid_input"
    assert "txt" in data["message"]
    assert not out.exists()


def test_plot_failure_text_mode_prints_no_table(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    held = tmp_path / "h.npy"
    np.save(held, np.linspace(0.0, 4.0, 500))
    argv = ["calibrate", "--held-out", str(held), "--epsilon", "1", "--cohort", "200"]
    code = main([*argv, "--plot", str(tmp_path / "out.txt")])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""  # the error is on stderr only, as every input error
    assert "dpledger: error:" in captured.err


@pytest.mark.parametrize(("text", "column"), [("1\n2\n3\n", None), ("0.5,2\n1,3\n", "0.5")])
def test_headerless_csv_is_refused_not_first_value_dropped(tmp_path, text, column):
    p = tmp_path / "losses.csv"
    p.write_text(text)
    with pytest.raises(InvalidInput, match="header"):
        load_held_out(p, column)


def test_headerless_csv_cli_exit_2(tmp_path, capsys):
    p = tmp_path / "losses.csv"
    p.write_text("9\n1\n2\n")
    code = main(["calibrate", "--held-out", str(p), "--epsilon", "1", "--cohort", "200"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert "header" in captured.err


def test_named_header_still_reads(tmp_path):
    p = tmp_path / "losses.csv"  # a column named like a number (a year) beside a name is fine
    p.write_text("loss,2026\n1,2\n3,4\n")
    assert load_held_out(p, "loss").tolist() == [1.0, 3.0]
    assert load_held_out(p, "2026").tolist() == [2.0, 4.0]
