"""Review 44 (acct): ``dpledger ledger lifetime`` said the PLD view was missing because
"the loss is outside the accountant's 1e-06–100" whenever :func:`pld_epsilon` gave None —
but it also gives None when a release's noise spans fewer than ``PLD_MIN_GRID_STEPS``
steps of OpenDP's output grid (a clip of 1e-6 at ε = 10: scale 1e-7 on the 2^-40 grid),
with the loss (ε = 10 here) well inside that range. The printed reason was invented."""

from __future__ import annotations

from pathlib import Path

import pytest

import dpledger as dl
from dpledger.accounting import pld_installed
from dpledger.cli.main import main

POLICY = """
name = "tiny"
version = "1"
neighbouring = "add_remove"
epoch_epsilon = "40"
delta = 1e-6
[regions]
names = ["a"]
[metrics.m]
kind = "scalar_mean"
epsilon = "10"
clip = { low = "0", high = "0.000001", source = "test" }
"""


@pytest.mark.skipif(not pld_installed(), reason="needs dp_accounting (the pld extra)")
def test_lifetime_names_the_coarse_grid_not_an_invented_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.toml"
    path.write_text(POLICY)
    db = str(tmp_path / "l.db")
    with dl.Ledger.open(db, dl.Policy.load(path), mode="create") as ledger:
        ledger.release(dl.ReleaseRequest(epoch=0, metric="m", region="a", cohort=100), 1e-5)
        life = ledger.lifetime()
    assert (life.epsilon_basic, life.epsilon_pld) == (10, None)  # in range, yet no view
    assert main(["ledger", "lifetime", "--ledger", db, "--policy", str(path)]) == 0
    out = capsys.readouterr().out
    assert "PLD ε = none" in out
    assert "grid" in out  # the actual reason is named …
    assert "the loss is outside" not in out or " or " in out  # … no false one claimed
