"""Review 42 diff 4: c438317 made every empty ``Ledger.entries`` answer decode every
recorded policy version (to refuse a typo'd filter), even with no filter given: export's
last page and a poller's ``entries(after=head)`` did. A ledger whose older recorded policy
body is unreadable (verify's business) could no longer be exported: exit 0 with every
entry became exit 2 with nothing. A name the ledger's own policy has needs no older one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from factories import policy, policy_text

import dpledger as dl
from dpledger.cli.main import main


def _ledger(tmp_path: Path) -> tuple[str, Path]:
    target = str(tmp_path / "l.db")
    for version, epoch in (("1", 0), ("2", 1)):
        with dl.Ledger.open(target, policy(version=version), mode="create") as ledger:
            request = dl.ReleaseRequest(epoch=epoch, metric="loss", region="north", cohort=1000)
            ledger.release_round([(request, 800.0)])
    con = sqlite3.connect(target)
    con.execute("UPDATE dpl_policies SET body = '{' WHERE version = '1'")
    con.commit()
    con.close()
    path = tmp_path / "v2.toml"
    path.write_text(policy_text(version="2"))
    return target, path


def test_an_unfiltered_tail_reads_no_recorded_policy(tmp_path: Path) -> None:
    target, _ = _ledger(tmp_path)
    with dl.Ledger.open(target, policy(version="2"), mode="read") as ledger:
        assert ledger.entries(after=2) == []
        assert ledger.entries(epoch=7, region="north", metric="loss") == []


def test_export_of_a_ledger_with_an_unreadable_old_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target, path = _ledger(tmp_path)
    capsys.readouterr()
    assert main(["ledger", "export", "--policy", str(path), "--ledger", target]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_lifetime_of_a_region_the_policy_has_reads_no_recorded_policy(tmp_path: Path) -> None:
    # 87b643e read every recorded version for any region without a release of its own
    target, _ = _ledger(tmp_path)
    with dl.Ledger.open(target, policy(version="2"), mode="read") as ledger:
        assert ledger.lifetime("south").releases == 0
