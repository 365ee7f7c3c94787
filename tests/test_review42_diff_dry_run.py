"""Review 42 (the dropped-trigger diff): the dry run decides as the release would.

A writer refuses a schema-4 ledger whose own triggers were dropped (``LedgerCorrupted``,
CLI exit 2), and ``Ledger.check`` on a ledger opened to write does too. ``dpledger
check`` — the CLI's dry run, a reading command that opens the ledger ``mode="read"`` —
skipped that check and approved (exit 0) the release that ``dpledger release`` then
refused (exit 2): a CI gate that checks first was told yes. ``Writer.evaluate`` already
holds a read handle's dry run to the writer's refusals (``check_as_writer``); it now
holds it to this one too. Both stores.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from _stores import CONTRACT, CONTRACT_POLICY, StoreUnderTest

from dpledger import Ledger, ReleaseRequest
from dpledger.cli.main import main
from dpledger.errors import LedgerCorrupted
from dpledger.ledger.guards import GUARDS_MISSING

LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)


def _dropped(store: StoreUnderTest) -> None:
    with store.open() as ledger:
        ledger.release(LOSS, 30.0)
    store.disable_append_only()


def test_a_read_handles_dry_run_refuses_as_the_release_does(store: StoreUnderTest) -> None:
    _dropped(store)
    with Ledger.open(store.target, CONTRACT, mode="read") as reader:
        with pytest.raises(LedgerCorrupted, match=re.escape(GUARDS_MISSING)):
            reader.check(LOSS, 30.0)  # was: approved
        assert not reader.verify().ok  # the reads still work
        assert reader.spent(0, "a").amount > 0


def test_the_cli_check_exits_as_the_release_does(
    store: StoreUnderTest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _dropped(store)
    policy = tmp_path / "p.toml"
    policy.write_text(CONTRACT_POLICY)
    aggregate = tmp_path / "agg.npy"
    np.save(aggregate, np.float64(30.0))
    at = ["--ledger", store.target, "--policy", str(policy)]
    request = ["--epoch", "0", "--metric", "loss", "--region", "a", "--cohort", "100"]
    released = main(["release", *at, *request, "--aggregate", str(aggregate)])
    checked = main(["check", *at, *request, "--aggregate", str(aggregate)])
    assert (released, checked) == (2, 2)  # was: (2, 0)
    assert GUARDS_MISSING in capsys.readouterr().err
