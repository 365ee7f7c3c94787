"""The service page read an epoch's whole spend twice per (epoch, region) it showed
(``spent`` and ``remaining`` each read it): with open regions, quadratic like ``ledger
show`` was before review 42. ``region_budgets`` gives the same rows from one read per
epoch. Counted, not timed."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import dpledger as dl
from dpledger.ledger import store as store_module
from dpledger.ledger.regions import region_budgets
from tests.factories import policy
from tests.test_review42_ldg_show_scaling import _made


def _ledger(tmp_path: Path, regions: int) -> tuple[str, dl.Policy]:
    target = str(tmp_path / "l.db")
    path = _made(target, tmp_path, regions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        return target, dl.Policy.load(path)


def test_region_budgets_agree_with_spent_and_remaining(tmp_path: Path) -> None:
    target, policy = _ledger(tmp_path, 5)
    names = ["r3", "*", "r0", "never-spent"]  # open regions: every name has a view
    with dl.Ledger.open(target, policy, mode="read") as ledger:
        for epoch in (0, 1, 3):
            rows = region_budgets(ledger, epoch, names)
            assert [r for r, _, _ in rows] == names
            for region, spent, left in rows:
                assert spent == ledger.spent(epoch, region)
                assert left == ledger.remaining(epoch, region)
        assert region_budgets(ledger, 3, []) == []


def test_region_budgets_leave_out_a_region_no_policy_has(tmp_path: Path) -> None:
    closed = policy()  # three named regions
    with dl.Ledger.open(str(tmp_path / "c.db"), closed, mode="create") as ledger:
        region = closed.regions.names[0]
        rows = region_budgets(ledger, 0, [region, "nowhere", "*"])
        assert [r for r, _, _ in rows] == [region, "*"]
        with pytest.raises(dl.DpLedgerError):
            ledger.spent(0, "nowhere")  # the rows leave out what spent() refuses


def test_region_budgets_read_the_spend_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, policy = _ledger(tmp_path, 40)
    reads: list[int] = []
    spend = store_module.SqlStore.epoch_spend
    monkeypatch.setattr(
        store_module.SqlStore, "epoch_spend", lambda s, e: (reads.append(e), spend(s, e))[1]
    )
    with dl.Ledger.open(target, policy, mode="read") as ledger:
        reads.clear()
        rows = region_budgets(ledger, 3, [f"r{i}" for i in range(40)])
    assert len(rows) == 40
    assert len(reads) <= 1
