"""Review 39 (CLI): ``dpledger demo --json`` gave each region's budget as bare
fractions (``{"spent": "3/5", "remaining": "2/5"}``) with no unit, while every other
budget the CLI prints in JSON names its unit (ε or ρ). Each entry now names it.
"""

from __future__ import annotations

import json

from dpledger.cli.main import main


def test_demo_json_budget_names_its_unit(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["demo", "--clients", "2000", "--ledger", "d.db", "--json", "--quiet"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["budget"]
    for entry in report["budget"].values():
        assert entry["unit"] == "epsilon"
        assert {"spent", "remaining"} <= set(entry)
