"""An aggregate or request JSON file that starts with a UTF-8 byte-order mark (as editors
on Windows write it) is read, as a policy, a held-out CSV and a service body with one
are: it was refused with Python's own advice ("decode using utf-8-sig")."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger.cli.main import main

POLICY = str(SPATIAL)
BOM = b"\xef\xbb\xbf"


def test_json_files_with_a_byte_order_mark_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "l.db"
    assert main(["ledger", "init", "--policy", POLICY, "--ledger", str(ledger)]) == 0
    agg, req = tmp_path / "sum.json", tmp_path / "req.json"
    agg.write_bytes(BOM + b"1000.5")
    req.write_bytes(
        BOM + b'{"epoch": 0, "metric": "clipped_mean_loss", "region": "na", "cohort": 2000}'
    )
    capsys.readouterr()
    code = main(["check", "--policy", POLICY, "--ledger", str(ledger), "--request", str(req),
                 "--aggregate", str(agg)])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "approved" in out
