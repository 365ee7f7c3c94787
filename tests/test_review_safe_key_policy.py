"""``keys create --policy FILE`` checks scope names against FILE even when FILE is not a
policy the ledger is bound to (another policy name): a key scoped to a region the
ledger's policy has never had is created, exit 0. The binding check ``serve`` and every
release apply (policy name) should apply here too."""

from __future__ import annotations

from pathlib import Path

from dpledger.cli.main import main

POLICIES = Path(__file__).resolve().parents[1] / "policies"
CROSS, SPATIAL = str(POLICIES / "cross-silo.toml"), str(POLICIES / "spatial-eval.toml")


def test_key_scopes_are_not_checked_against_another_ledgers_policy(tmp_path: Path) -> None:
    ledger, agg = tmp_path / "l.db", tmp_path / "agg.json"
    agg.write_text("10")
    assert main(["release", "--policy", CROSS, "--ledger", str(ledger), "--epoch", "0",
                 "--metric", "length_of_stay", "--region", "hospital-01",
                 "--cohort", "5000", "--aggregate", str(agg)]) == 0  # fmt: skip
    keys = tmp_path / "k.db"
    argv = ["keys", "create", "--ledger", str(ledger), "--keys", str(keys), "--name", "t",
            "--action", "release", "--region", "eu-west", "--any-metric",
            "--policy", SPATIAL]  # fmt: skip
    assert main(argv) == 2  # eu-west is spatial-eval's region, not cross-silo-eval's
    assert not keys.exists()
