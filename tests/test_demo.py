"""The main job end to end: findings from released values, JSON that matches the ledger."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dpledger import InvalidInput, Ledger, Policy
from dpledger.cli.main import main
from dpledger.metrics import spatial
from dpledger.sim.demo import (
    DEFAULT_POLICY,
    DRIFT_FACTOR,
    DemoResult,
    _contributions,
    _findings,
    _region_sums,
    contribution_grid,
    policy_reference,
    reference_ratio,
    rules,
    run_demo,
)
from dpledger.sim.fleet import make_fleet
from dpledger.sim.report import text_report


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    return text_report(run_demo(ledger_path=path, progress=None)), path


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    return run_demo(ledger_path=tmp_path_factory.mktemp("rule") / "demo.db", progress=None)


def test_drift_is_judged_on_the_ratio_even_when_the_histogram_is_refused(
    result: DemoResult,
) -> None:
    """A cohort between the ratio's floor (600) and the histogram's (1,199) publishes the
    ratio only: the drift rule must still apply, as printed."""
    drop = ("eu-west", "error_histogram")
    without = dataclasses.replace(
        result,
        derived={k: v for k, v in result.derived.items() if k != drop},
        releases=tuple(r for r in result.releases if (r.request.region, r.request.metric) != drop),
        findings=(),
    )
    kinds = {(f.region, f.kind) for f in _findings(without)}
    assert ("eu-west", "lateral_drift") in kinds


def test_a_crs_finding_says_the_ratio_is_past_the_drift_threshold_too(result: DemoResult) -> None:
    """eu-east's ratio (≈ 2.0, interval above 1.70) meets the drift rule; the CRS finding
    takes precedence, as rules() prints, and says so instead of dropping it silently."""
    crs = next(f for f in result.findings if f.kind == "crs_mismatch")
    assert crs.region == "eu-east"
    assert "past the drift threshold" in crs.message
    assert "takes precedence" in rules(result.policy)["lateral_drift"]
    assert not any(f.region == "eu-east" and f.kind == "lateral_drift" for f in result.findings)


def test_report_shows_drift_crs_overconfidence_and_the_refused_small_region(
    report: tuple[str, Path],
) -> None:
    text, _ = report
    assert "[lateral drift] eu-west" in text
    assert "[CRS-mismatch signature] eu-east" in text
    assert "[over-confidence] na" in text
    assert "[refused] apac" in text
    assert "REFUSED (5 releases)" in text


def test_demo_ledger_verifies_and_spends_exactly_the_allocation(report: tuple[str, Path]) -> None:
    _, path = report
    with Ledger.open(path, Policy.load(DEFAULT_POLICY)) as ledger:
        assert ledger.verify().ok
        assert len(ledger) == 15  # 5 metrics × 3 publishable regions
        assert ledger.spent(0, "eu-west").amount == 1
        assert ledger.spent(0, "apac").amount == 0


def test_json_output_parses_and_matches_the_ledger_entries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "demo.db"
    assert main(["demo", "--json", "--ledger", str(db), "--plots", str(tmp_path / "png")]) == 0
    out = json.loads(capsys.readouterr().out)
    with Ledger.open(db, Policy.load(DEFAULT_POLICY)) as ledger:
        entries = {e.entry_id: e for e in ledger.entries()}
    assert len(out["releases"]) == len(entries) == 15
    for rel in out["releases"]:
        entry = entries[rel["entry_id"]]
        assert list(entry.draft.output) == rel["noisy_sum"]
        assert (entry.draft.metric, entry.draft.region) == (rel["metric"], rel["region"])
        assert entry.as_dict()["charge"] == rel["charge"]
    assert {f["kind"] for f in out["findings"]} >= {"lateral_drift", "refused"}
    assert len(out["plots"]) == 3
    assert all(Path(p).stat().st_size > 1000 for p in out["plots"])


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dpledger.cli", "demo", "--quiet", *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_demo_replaces_its_own_previous_ledger_only_with_fresh(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    first = _demo("--ledger", str(db))
    assert first.returncode == 0, first.stderr
    assert "[lateral drift]" in first.stdout
    again = _demo("--ledger", str(db))  # without --fresh: refused, the ledger untouched
    assert again.returncode == 2
    assert "pass --fresh" in again.stderr
    assert "Traceback" not in again.stderr
    fresh = _demo("--ledger", str(db), "--fresh")  # starts from an empty ledger: not refused
    assert fresh.returncode == 0, fresh.stderr
    assert "[lateral drift]" in fresh.stdout


def test_demo_never_deletes_a_copy_of_its_ledger(tmp_path: Path) -> None:
    """A demo ledger copied elsewhere is the user's file: ``--fresh`` replaced it (its
    label was all the demo read; audit 2, finding 12). The path it was made at is now
    in its labels too."""
    from dpledger.sim.demo_ledger import claim_ledger, demo_labels

    made = tmp_path / "d.db"
    with Ledger.open(made, Policy.load(DEFAULT_POLICY), mode="create",
                     labels=demo_labels(made)) as ledger:  # fmt: skip
        ledger.init()
    copy = tmp_path / "copy.db"
    copy.write_bytes(made.read_bytes())
    with pytest.raises(InvalidInput, match="is a copy of the demo ledger made at"):
        claim_ledger(copy, fresh=True)
    assert copy.read_bytes() == made.read_bytes()
    claim_ledger(made, fresh=True)  # its own file: freed
    assert not made.exists()


def test_demo_never_deletes_a_ledger_it_did_not_create(tmp_path: Path) -> None:
    from factories import policy

    from dpledger import ReleaseRequest

    db = tmp_path / "real.db"
    with Ledger.open(db, policy(), mode="create") as ledger:
        ledger.release(ReleaseRequest(epoch=0, metric="loss", region="north", cohort=10), 1.0)
    before = db.read_bytes()
    for args in ((), ("--fresh",)):
        proc = _demo("--ledger", str(db), *args)
        assert proc.returncode == 2
        assert "did not create" in proc.stderr
        assert "no demo label" in proc.stderr  # an unlabelled ledger: maybe an old demo's
        assert "delete it yourself" in proc.stderr
    assert db.read_bytes() == before
    with Ledger.open(db, policy(), mode="read") as ledger:
        assert len(ledger) == 1


@pytest.mark.parametrize("content", [b"", b"not a ledger at all"])
def test_demo_refuses_to_overwrite_any_other_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    proc = _demo("--ledger", str(path), "--fresh")
    assert proc.returncode == 2
    assert "never overwrites" in proc.stderr
    assert path.read_bytes() == content


def test_every_finding_prints_the_rule_it_was_decided_by(report: tuple[str, Path]) -> None:
    """Issue 11: the report said "excludes the baseline 1.11" while its rule was 1.5 × it."""
    text, _ = report
    threshold = f"{DRIFT_FACTOR * policy_reference(Policy.load(DEFAULT_POLICY)):.2f}"
    findings = [
        line for line in text.splitlines() if line.startswith("  [") and "refused" not in line
    ]
    assert len(findings) == 3
    assert all("rule: whole 95% interval" in line for line in findings)
    drift = next(line for line in findings if "[lateral drift]" in line)
    assert f"above {threshold} = 1.5 × the healthy reference" in drift
    assert "excludes the baseline" not in text


def test_the_drift_baseline_is_the_released_statistic_not_an_rmse_ratio() -> None:
    """The released ratio is a mean of per-client clipped ratios; so is its reference: the
    same metric function on a healthy reference fleet (seeded, so this is deterministic)."""
    ref = reference_ratio(10.0)
    fleet = make_fleet(n_clients=50_000, seed=10_001, scenarios=(), regions=("reference",))
    again = spatial.along_across_ratio(fleet.along, fleet.across, clip=10.0, offsets=fleet.offsets)
    assert ref == float(np.mean(again))
    assert 1.12 < ref < 1.14  # per-client ratios of ~40 samples skew above 1.00/0.90 = 1.11
    # independently: a per-client loop over the same fleet, and the pooled RMSE ratio it is not
    ends = np.append(fleet.offsets, fleet.n_samples)
    by_client = []
    for a, b in itertools.pairwise(ends):
        ratio = math.sqrt(float(np.mean(fleet.across[a:b] ** 2) / np.mean(fleet.along[a:b] ** 2)))
        by_client.append(min(ratio, 10.0))
    assert ref == pytest.approx(float(np.mean(by_client)), rel=1e-12)
    pooled = math.sqrt(float(np.sum(fleet.across**2) / np.sum(fleet.along**2)))
    assert abs(pooled - 1.0 / 0.9) < 0.005  # the healthy model's RMS errors: 0.90 / 1.00 m
    assert ref - pooled > 0.01  # the skew is ≥ 10 standard errors (~0.001), not noise


def test_the_aggregator_stand_in_sums_exactly(tmp_path: Path) -> None:
    policy = Policy.load(DEFAULT_POLICY)
    fleet = make_fleet(n_clients=600, seed=5, regions=policy.regions.names)
    rows = _contributions(fleet, policy)["calibration_gap"]
    grid = contribution_grid(policy.metrics["calibration_gap"])
    sums = _region_sums(fleet, rows, grid)
    r = fleet.client_range("na")
    units = grid.encode(rows[r.start : r.stop])
    exact = [Fraction(int(u)) * Fraction(grid.quantum) for u in units.sum(axis=0, dtype=object)]
    assert [Fraction(float(x)) for x in sums["na"]] == exact


def test_plots_without_matplotlib_refuse_before_anything_is_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The plotting extra is checked first: no ledger is created, exit 2 with the hint."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    db = tmp_path / "demo.db"
    assert main(["demo", "--ledger", str(db), "--plots", str(tmp_path / "png")]) == 2
    assert "matplotlib" in capsys.readouterr().err
    assert not db.exists()
    assert not (tmp_path / "png").exists()
