"""Review 42, diff 2: a read handle's dry run (``dpledger check``, ``Ledger.check``)
approved a release on a ledger whose own trigger was changed or disabled, while the
release itself was refused (the writer checks the ledger's triggers as it connects).

The diff made the read handle's dry run refuse a ledger with *dropped* triggers "as the
release would"; one step to the side, a disabled (PostgreSQL) or rewritten (SQLite)
trigger — refused by every writer since review 40 — still got ``approved`` (exit 0) from
``check`` while ``release`` exited 2 with "nothing was written".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _stores import CONTRACT, CONTRACT_POLICY, StoreUnderTest

from dpledger import Ledger, ReleaseRequest
from dpledger.cli.main import main
from dpledger.errors import LedgerCorrupted

LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)
ARGS = ["--epoch", "0", "--metric", "loss", "--region", "a", "--cohort", "100"]


def _changed_spend_guard(store: StoreUnderTest) -> None:
    with store.open() as ledger:
        ledger.release(LOSS, 30.0)
    if store.kind == "sqlite":  # its own name, a condition that never holds
        store.raw("DROP TRIGGER dpl_spend_no_decrease")
        store.raw(
            "CREATE TRIGGER dpl_spend_no_decrease BEFORE UPDATE ON dpl_spend WHEN 0 "
            "BEGIN SELECT 1; END"
        )
    else:
        store.raw("ALTER TABLE dpl_spend DISABLE TRIGGER dpl_spend_no_decrease")


def test_a_read_handle_dry_run_refuses_a_changed_trigger_as_the_release_does(
    store: StoreUnderTest,
) -> None:
    _changed_spend_guard(store)
    with pytest.raises(LedgerCorrupted, match="dpl_spend_no_decrease"):
        Ledger.open(store.target, CONTRACT, mode="write").close()
    with Ledger.open(store.target, CONTRACT, mode="read") as reader:
        with pytest.raises(LedgerCorrupted, match="dpl_spend_no_decrease"):
            reader.check(LOSS, 30.0)  # was: approved
        assert any("dpl_spend_no_decrease" in p for p in reader.verify().problems)


def test_the_cli_check_exits_as_the_release_does(
    store: StoreUnderTest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _changed_spend_guard(store)
    policy, aggregate = tmp_path / "p.toml", tmp_path / "a.json"
    policy.write_text(CONTRACT_POLICY)
    aggregate.write_text("30.0")
    common = ["--policy", str(policy), "--ledger", store.target, *ARGS]
    released = main(["release", *common, "--aggregate", str(aggregate)])
    capsys.readouterr()
    checked = main(["check", *common, "--aggregate", str(aggregate)])
    err = capsys.readouterr().err
    assert (released, checked) == (2, 2)  # was: release 2, check 0 ("approved")
    assert "dpl_spend_no_decrease" in err
    assert "nothing was written" in err
