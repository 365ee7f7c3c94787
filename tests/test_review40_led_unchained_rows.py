"""A row planted below the chain (entry id 0 or negative) passed ``verify`` (review 40).

The audit reads the chain from entry 1 on (``seq > 0``), but the other reads of the
entries table do not: the release-id lookup found a planted row ``seq = 0`` with a
chosen release id and output (the exact aggregate, no noise), and ``release
--release-id`` returned it as a retry ("charged now: 0") while ``ledger verify`` said
"ok". verify now fails when the table holds rows the chain does not reach, and a
retry is only ever answered by an entry on the chain.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger import ReleaseRequest
from dpledger.approval.request import fingerprint
from dpledger.cli.main import main


@pytest.mark.parametrize("seq", [0, -7])
def test_a_row_below_the_chain_fails_verify_and_answers_no_retry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seq: int
) -> None:
    ledger = tmp_path / "L.db"
    agg = tmp_path / "agg.json"
    agg.write_text("1000.0")
    at = ["--policy", str(SPATIAL), "--ledger", str(ledger)]
    release = ["release", *at, "--epoch", "0", "--metric", "clipped_mean_loss"]
    release += ["--region", "na", "--cohort", "3000", "--aggregate", str(agg)]
    assert main([*release, "--release-id", "r1"]) == 0
    capsys.readouterr()

    conn = sqlite3.connect(ledger)
    cols = [c[1] for c in conn.execute("PRAGMA table_info(dpl_entries)")]
    row = list(conn.execute("SELECT * FROM dpl_entries WHERE seq = 1").fetchone())
    row[cols.index("seq")] = seq
    row[cols.index("release_id")] = "planted"
    request = ReleaseRequest(
        epoch=0, metric="clipped_mean_loss", region="na", cohort=3000, release_id="planted"
    )
    row[cols.index("request_hash")] = fingerprint(request)
    row[cols.index("output")] = json.dumps([1000.0])  # the exact sum, no noise
    conn.execute(f"INSERT INTO dpl_entries VALUES ({','.join('?' * len(row))})", row)
    conn.commit()
    conn.close()

    assert main(["ledger", "verify", *at]) == 1
    assert "outside the chain" in capsys.readouterr().out

    code = main([*release, "--release-id", "planted"])
    out = capsys.readouterr()
    assert "recorded earlier as entry" not in out.out
    assert "0.333333\n" not in out.out  # the planted, un-noised value
    assert code != 0  # the id is taken (by a row off the chain): refused, nothing spent


def test_a_row_below_the_chain_binds_no_epoch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An epoch is bound to the policy of its first entry on the chain: a row planted at
    ``seq = 0`` naming another policy no longer decides it (a later release there was
    refused for a binding nobody made; diff review)."""
    ledger = tmp_path / "L.db"
    agg = tmp_path / "agg.json"
    agg.write_text("1000.0")
    at = ["--policy", str(SPATIAL), "--ledger", str(ledger)]
    release = ["release", *at, "--metric", "clipped_mean_loss"]
    release += ["--region", "na", "--cohort", "3000", "--aggregate", str(agg)]
    assert main([*release, "--epoch", "0"]) == 0
    conn = sqlite3.connect(ledger)
    cols = [c[1] for c in conn.execute("PRAGMA table_info(dpl_entries)")]
    row = list(conn.execute("SELECT * FROM dpl_entries WHERE seq = 1").fetchone())
    row[cols.index("seq")], row[cols.index("epoch")] = 0, 5
    row[cols.index("policy_hash")], row[cols.index("policy_version")] = "f" * 64, "9"
    conn.execute(f"INSERT INTO dpl_entries VALUES ({','.join('?' * len(row))})", row)
    conn.commit()
    conn.close()
    capsys.readouterr()
    assert main([*release, "--epoch", "5"]) == 0, capsys.readouterr().err
