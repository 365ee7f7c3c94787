"""Review 42 (ldg): ``dpledger ledger show`` and ``export`` held every entry of the ledger
decoded in memory at once (10^5 entries: ~290 MB; 10^6 would be ~3 GB), and ``show`` read
an epoch's whole spend table twice per region it listed (``spent`` and ``remaining`` each
read it): with open regions that is quadratic — 2,000 regions in one epoch took 39 s,
10,000 would take minutes. Both now read the entries a page at a time, and ``show`` reads
an epoch's spend once (``epoch_budgets``), with the same rows and lines; a damaged entry
is still exit 2 with nothing printed. Counted, not timed."""

from __future__ import annotations

import json
import sqlite3
import warnings
from pathlib import Path
from typing import Any

import pytest
from _stores import StoreUnderTest

import dpledger as dl
from dpledger.cli import ledger as cli_ledger
from dpledger.cli.main import main
from dpledger.ledger import store as store_module
from dpledger.ledger.records import Entry
from dpledger.ledger.regions import epoch_budgets
from tests.factories import drop_spend_guard

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


def _pages(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the entry lists the store returns, with pages of 7 entries."""
    sizes: list[int] = []
    entries = store_module.SqlStore.entries

    def counted(s: store_module.SqlStore, **kw: Any) -> list[Entry]:
        found = entries(s, **kw)
        sizes.append(len(found))
        return found

    monkeypatch.setattr(store_module.SqlStore, "entries", counted)
    monkeypatch.setattr(cli_ledger, "_PAGE", 7)
    return sizes


def test_show_reads_each_epochs_spend_once_and_no_entry(
    store: StoreUnderTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    policy = _made(store.target, tmp_path, 40)
    reads: list[int] = []
    pages = _pages(monkeypatch)
    spend = store_module.SqlStore.epoch_spend
    monkeypatch.setattr(
        store_module.SqlStore, "epoch_spend", lambda s, e: (reads.append(e), spend(s, e))[1]
    )
    argv = ["ledger", "show", "--policy", str(policy), "--ledger", store.target, "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["entries"] == 81
    rows = {(r["epoch"], r["region"]): (r["spent"], r["remaining"]) for r in out["regions"]}
    assert len(rows) == 2 * 41
    assert rows[(0, "r7")] == ("1/10", "999/10")
    assert rows[(3, "r7")] == ("1/5", "499/5")
    assert rows[(3, "*")] == ("1/5", "499/5")
    assert max(pages) <= 7  # never every entry decoded at once
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


def test_export_pages_the_same_lines(
    store: StoreUnderTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    policy = _made(store.target, tmp_path, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        p = dl.Policy.load(policy)
    with dl.Ledger.open(store.target, p, mode="read") as ledger:
        whole = [json.loads(json.dumps(e.as_dict())) for e in ledger.entries()]
    pages = _pages(monkeypatch)
    argv = ["ledger", "export", "--policy", str(policy), "--ledger", store.target]
    assert main(argv) == 0
    assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == whole
    out = tmp_path / "out.jsonl"
    assert main([*argv, "--out", str(out)]) == 0
    assert [json.loads(x) for x in out.read_text().splitlines()] == whole
    assert len(whole) == 21
    assert max(pages) <= 7


def test_export_of_a_damaged_entry_prints_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "l.db"
    policy = _made(str(target), tmp_path, 10)
    con = sqlite3.connect(target)
    drop_spend_guard(con)
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        con.execute(f"DROP TRIGGER {name}")
    con.execute("UPDATE dpl_entries SET output = '{' WHERE seq = 20")
    con.commit()
    con.close()
    capsys.readouterr()
    argv = ["ledger", "export", "--policy", str(policy), "--ledger", str(target)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "entry 20 is damaged" in captured.err
