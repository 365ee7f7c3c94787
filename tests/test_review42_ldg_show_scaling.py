"""Review 42 (ldg): ``dpledger ledger show`` loaded every entry of the ledger into memory
only to learn its epochs (10^5 entries: ~290 MB and 5 s, all in decoding rows it then
dropped), and read an epoch's whole spend table twice per region it listed (``spent``
and ``remaining`` each read it): with open regions that is quadratic — 2,000 regions in
one epoch took 39 s, 10,000 would take minutes. It now reads the epochs and, per epoch,
its spend once (``epoch_budgets``), with the same rows. Counted, not timed."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from _stores import StoreUnderTest

import dpledger as dl
from dpledger.cli.main import main
from dpledger.ledger import schema
from dpledger.ledger import store as store_module
from dpledger.ledger.regions import epoch_budgets

OPEN = """
name = "open"
version = "1"
neighbouring = "replace"
epoch_epsilon = "400"
eval_fraction = "0.25"
allocation = "pooled"
[regions]
open = true
[metrics.loss]
kind = "scalar_mean"
epsilon = "0.1"
clip = { low = "0", high = "1", source = "t" }
"""


def _made(target: str, tmp_path: Path, regions: int) -> Path:
    path = tmp_path / "open.toml"
    path.write_text(OPEN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        p = dl.Policy.load(path)
    with dl.Ledger.open(target, p, mode="create") as ledger:
        items = [
            (dl.ReleaseRequest(epoch=e, metric="loss", region=f"r{i}", cohort=100), 50.0)
            for e in (0, 3)
            for i in range(regions)
        ]
        items.append((dl.ReleaseRequest(epoch=3, metric="loss", region="*", cohort=100), 5.0))
        ledger.release_round(items)
    return path


def test_show_reads_each_epochs_spend_once_and_no_entry(
    store: StoreUnderTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    policy = _made(store.target, tmp_path, 40)
    reads: list[int] = []
    decoded: list[int] = []
    spend = store_module.SqlStore.epoch_spend
    to_entry = store_module.row_to_entry
    monkeypatch.setattr(
        store_module.SqlStore, "epoch_spend", lambda s, e: (reads.append(e), spend(s, e))[1]
    )
    monkeypatch.setattr(store_module, "row_to_entry", lambda r: (decoded.append(1), to_entry(r))[1])
    assert schema.row_to_entry is to_entry
    argv = ["ledger", "show", "--policy", str(policy), "--ledger", store.target, "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["entries"] == 81
    rows = {(r["epoch"], r["region"]): (r["spent"], r["remaining"]) for r in out["regions"]}
    assert len(rows) == 2 * 41
    assert rows[(0, "r7")] == ("1/10", "999/10")
    assert rows[(3, "r7")] == ("1/5", "499/5")
    assert rows[(3, "*")] == ("1/5", "499/5")
    assert decoded == []  # no entry decoded to list the epochs
    assert len(reads) <= 2 * 2  # a bounded number of reads per epoch, not one per region


def test_epoch_budgets_agree_with_spent_and_remaining(tmp_path: Path) -> None:
    target = str(tmp_path / "l.db")
    policy = _made(target, tmp_path, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        p = dl.Policy.load(policy)
    with dl.Ledger.open(target, p, mode="read") as ledger:
        for epoch in (0, 1, 3):
            for region, spent, left in epoch_budgets(ledger, epoch):
                assert spent == ledger.spent(epoch, region)
                assert left == ledger.remaining(epoch, region)
