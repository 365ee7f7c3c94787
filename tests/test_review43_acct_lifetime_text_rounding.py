"""Review 44 (acct): ``dpledger ledger lifetime`` printed its (ε, δ) figures — the zCDP
ledger's headline among them — to 6 significant digits rounded to the NEAREST, so the
printed ε could sit below the bound computed (ε = 0.396857 printed for 0.39685742…): a
guarantee stated smaller than the one the ledger can prove. An upper bound is printed
rounded up (:func:`dpledger._printed.outward`), as the pure headline's double is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import dpledger as dl
from dpledger.cli.main import main

POLICY = """
name = "z"
version = "1"
neighbouring = "add_remove"
definition = "zcdp"
epoch_rho = "1"
delta = 1e-6
[regions]
names = ["north"]
[metrics.count]
kind = "scalar_mean"
rho = "0.005"
clip = { low = "0", high = "1", source = "test" }
"""


def test_printed_lifetime_epsilons_are_never_below_the_bounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.toml"
    path.write_text(POLICY)
    db = str(tmp_path / "l.db")
    with dl.Ledger.open(db, dl.Policy.load(path), mode="create") as ledger:
        ledger.release(dl.ReleaseRequest(epoch=0, metric="count", region="north", cohort=50), 7.0)
        life = ledger.lifetime()
    assert life.method != "basic"
    figures = {"headline": life.epsilon, "zcdp": life.epsilon_zcdp}
    if life.epsilon_pld is not None:
        figures["pld"] = life.epsilon_pld
    # the case this pins: nearest rounding at 6 digits lands below one of the figures
    assert any(float(f"{x:.6g}") < x for x in figures.values())
    assert main(["ledger", "lifetime", "--ledger", db, "--policy", str(path)]) == 0
    out = capsys.readouterr().out
    head = re.search(r"→ ε = (\S+) at", out)
    zcdp = re.search(r"zCDP conversion ε = (\S+?);", out)
    assert head is not None, out
    assert zcdp is not None, out
    assert float(head[1]) >= life.epsilon, out
    assert float(zcdp[1]) >= life.epsilon_zcdp, out
    if life.epsilon_pld is not None:
        pld = re.search(r"PLD ε = (\S+)", out)
        assert pld is not None, out
        assert float(pld[1]) >= life.epsilon_pld, out
