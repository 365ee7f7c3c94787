"""Review 39 (CLI): ``dpledger plan --epoch`` beyond 2**63 - 1 planned an epoch no
release or ledger accepts, and only without ``--ledger``: with one it was refused
("epoch must lie in [0, 2**63 - 1]"). ``dl.plan`` now refuses it either way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import dpledger as dl
from dpledger.cli.main import main
from dpledger.errors import InvalidInput

SPATIAL = Path(__file__).resolve().parents[1] / "policies" / "spatial-eval.toml"


def test_plan_refuses_an_epoch_no_ledger_holds(capsys):
    assert main(["plan", str(SPATIAL), "--cohort", "na=5", "--epoch", str(2**63)]) == 2
    assert "2**63 - 1" in capsys.readouterr().err
    with pytest.raises(InvalidInput, match=r"2\*\*63 - 1"):
        dl.plan(dl.Policy.load(SPATIAL), {"na": 5}, epoch=2**63)
    assert dl.plan(dl.Policy.load(SPATIAL), {"na": 5}, epoch=2**63 - 1).epoch == 2**63 - 1
