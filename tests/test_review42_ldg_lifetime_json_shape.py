"""Review 42 (ldg): ``dpledger ledger lifetime --json`` prints a flat figure for a ledger of
one privacy unit but ``{"by_unit": [...]}`` once a policy version changed the unit (or the
ledger is opened with a version of the other unit) — a shape no document named, so a
script reading ``epsilon`` at the top level broke without warning. The docs now say
when each shape is printed; this pins both shapes and the sentence."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

import dpledger as dl
from dpledger.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
POLICY = """
name = "u"
version = "{v}"
neighbouring = "replace"
epoch_epsilon = "4"
allocation = "pooled"
{unit}
[regions]
names = ["north", "south"]
[metrics.loss]
kind = "scalar_mean"
epsilon = "0.1"
clip = {{ low = "0", high = "1", source = "t" }}
"""


def test_lifetime_json_shapes_are_the_documented_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1, v2 = tmp_path / "v1.toml", tmp_path / "v2.toml"
    v1.write_text(POLICY.format(v="1", unit=""))
    v2.write_text(POLICY.format(v="2", unit='privacy_unit = "record"\nmax_records_per_person = 3'))
    db = str(tmp_path / "l.db")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        with dl.Ledger.open(db, dl.Policy.load(v1), mode="create") as ledger:
            ledger.release(dl.ReleaseRequest(epoch=0, metric="loss", region="north", cohort=9), 5.0)
    argv = ["ledger", "lifetime", "--ledger", db, "--json", "--policy"]
    assert main([*argv, str(v1)]) == 0
    flat = json.loads(capsys.readouterr().out)
    assert flat["privacy_unit"] == "client"
    assert flat["epsilon_basic"] == "1/10"
    assert main([*argv, str(v2)]) == 0  # opened with the record-level version: both units
    both = json.loads(capsys.readouterr().out)
    assert [x["privacy_unit"] for x in both["by_unit"]] == ["client", "record"]
    docs = " ".join((ROOT / "docs" / "privacy-model.md").read_text().split())
    assert "`dpledger ledger lifetime --json` prints one figure's object" in docs
    assert '`{"by_unit": [...]}`' in docs
