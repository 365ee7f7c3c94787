"""Review 39 (CLI): ``dpledger plan R.toml --compare-units`` printed each metric's bars
under both privacy units without the budget they are computed at (neither the text
table nor the JSON named an ε or ρ), so a pasted comparison could not be checked or
reproduced. Each row now carries the metric's per-release budget, its unit named.
"""

from __future__ import annotations

import json
from pathlib import Path

import dpledger as dl
from dpledger.cli.main import main

CROSS_SILO = Path(__file__).resolve().parents[1] / "policies" / "cross-silo.toml"


def test_units_comparison_names_each_metrics_budget(capsys):
    policy = dl.Policy.load(CROSS_SILO)
    argv = ["plan", str(CROSS_SILO), "--compare-units", "--silo", "hospital-01=180"]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    for r in rows:
        assert r["budget_per_release"]["unit"] == "epsilon"
        assert r["budget_per_release"]["amount"] == str(policy.release_budget(r["metric"]))
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "ε/release" in text
    assert "digits_confusion           1/2" in text
