"""Review 42 (ldg): ``dpledger ledger show`` printed a zCDP policy's δ with ``:g`` (6
digits: δ = 0.12345678 read "0.123457"), and the budget notice for a raised δ did too,
so a raise from 1e-6 to 1.0000001e-6 read "raised δ from 1e-06 (version 1) to 1e-06".
``ledger lifetime`` already printed δ as short as it reads exactly (audit s29, F10);
both now do."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import dpledger as dl
from dpledger.cli.main import main

POLICY = """
name = "z"
version = "{v}"
neighbouring = "replace"
definition = "zcdp"
epoch_rho = "4"
delta = {delta}
allocation = "pooled"
[regions]
names = ["north"]
[metrics.loss]
kind = "scalar_mean"
rho = "0.01"
clip = {{ low = "0", high = "1", source = "t" }}
"""


def test_show_prints_delta_exactly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    v1, v2 = tmp_path / "v1.toml", tmp_path / "v2.toml"
    v1.write_text(POLICY.format(v="1", delta="1e-6"))
    v2.write_text(POLICY.format(v="2", delta="1.0000001e-6"))
    db = str(tmp_path / "l.db")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        with dl.Ledger.open(db, dl.Policy.load(v1), mode="create") as ledger:
            ledger.release(dl.ReleaseRequest(epoch=0, metric="loss", region="north", cohort=9), 5.0)
        with dl.Ledger.open(db, dl.Policy.load(v2), mode="write") as ledger:
            r = dl.ReleaseRequest(
                epoch=1, metric="loss", region="north", cohort=9, policy_version="2"
            )
            ledger.release(r, 5.0)
    assert main(["ledger", "show", "--policy", str(v2), "--ledger", db]) == 0
    out = capsys.readouterr().out
    assert "at δ = 1.0000001e-06)" in out
    assert "raised δ from 1e-06 (version 1) to 1.0000001e-06" in out
    v3 = tmp_path / "v3.toml"
    v3.write_text(POLICY.format(v="1", delta="0.12345678"))
    db3 = str(tmp_path / "l3.db")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        with dl.Ledger.open(db3, dl.Policy.load(v3), mode="create") as ledger:
            ledger.init()
    assert main(["ledger", "show", "--policy", str(v3), "--ledger", db3]) == 0
    assert "at δ = 0.12345678)" in capsys.readouterr().out
