"""Review 39 (CLI): ``dpledger plan --compare-definitions`` ignored ``--rounds``,
``--ledger`` and ``--epoch`` silently.

``plan P --cohort na=3000 --rounds 5 --compare-definitions`` printed the bars of the
policy's 1 round per epoch (each release at the whole ε share), 5× narrower than the
releases of a 5-round epoch would carry, while the README lists ``--rounds`` as a
``plan`` option. ``compare_definitions`` now takes ``rounds_per_epoch`` (as ``dl.plan``
does) and the CLI passes it; ``--ledger``/``--epoch``, which a comparison cannot use,
are refused as ``--compare-units`` refuses them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import dpledger as dl
from dpledger.cli.main import main
from dpledger.planning.definitions import compare_definitions

SPATIAL = Path(__file__).resolve().parents[1] / "policies" / "spatial-eval.toml"


def test_compare_definitions_laplace_bar_equals_the_plan_at_those_rounds(capsys):
    argv = ["plan", str(SPATIAL), "--cohort", "na=3000", "--rounds", "5"]
    code = main([*argv, "--compare-definitions", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0
    policy = dl.Policy.load(SPATIAL)
    planned = {m.metric: m for m in dl.plan(policy, {"na": 3000}, rounds_per_epoch=5).rows}
    for r in rows:
        assert r["laplace_bar"] == pytest.approx(planned[r["metric"]].error_bar, rel=1e-9)


def test_library_takes_rounds():
    policy = dl.Policy.load(SPATIAL)
    one = {r.metric: r for r in compare_definitions(policy, {"na": 3000})}
    five = {r.metric: r for r in compare_definitions(policy, {"na": 3000}, 5)}
    for name, r in one.items():
        assert five[name].laplace_bar == pytest.approx(5 * r.laplace_bar, rel=1e-9)
        assert five[name].gaussian_bar > r.gaussian_bar


@pytest.mark.parametrize("extra", [["--epoch", "3"], ["--ledger", "some.db"]])
def test_compare_definitions_refuses_flags_it_cannot_use(tmp_path, monkeypatch, capsys, extra):
    monkeypatch.chdir(tmp_path)
    argv = ["plan", str(SPATIAL), "--cohort", "na=3000", "--compare-definitions", *extra]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "--compare-definitions" in captured.err
    assert not (tmp_path / "some.db").exists()


def test_comparison_names_the_budgets_of_both_sides(capsys):
    """Neither the text nor the JSON said which ε and ρ per release the bars are at."""
    policy = dl.Policy.load(SPATIAL)
    argv = ["plan", str(SPATIAL), "--cohort", "na=3000", "--rounds", "2"]
    assert main([*argv, "--compare-definitions", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    for r in rows:
        assert r["epsilon"] == pytest.approx(float(policy.release_budget(r["metric"], 2)))
        assert 0 < r["rho"] < r["epsilon"]
    assert main([*argv, "--compare-definitions"]) == 0
    text = capsys.readouterr().out
    assert "ε/release" in text
    assert "ρ/release" in text
    assert "2 round(s) per epoch" in text
