"""Review (hrev): the SQLite spend guard (schema 4) watches a row's key and total, but not
its rowid. ``REPLACE`` on a rowid deletes the row it collides with, firing neither the
DELETE trigger nor the replace trigger (which looks for a row with NEW's key): a spend
total is deleted and re-inserted lower, on a connection with dpledger's own guard function
(the suite's raw-access attacker). ``verify`` still catches it. (A connection that registers
its own ``dpl_spend_lowered`` returning 0 disables the SQLite guard altogether.)"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from _stores import CONTRACT

from dpledger import Ledger, ReleaseRequest
from dpledger.ledger.sqlite_sql import guard_spend

LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)
TAMPERS = [
    (  # move the (0, a, loss) row's rowid onto a new key: the old row is deleted
        "INSERT OR REPLACE INTO dpl_spend (rowid, epoch, scope, metric, total) "
        "SELECT rowid, 99, 'zz', 'zz', '1' FROM dpl_spend WHERE scope = 'a'",
        "INSERT INTO dpl_spend VALUES (0, 'a', 'loss', '1/10')",
    ),
    (  # an UPDATE OR REPLACE onto the other row's rowid deletes that row
        "UPDATE OR REPLACE dpl_spend SET rowid = (SELECT rowid FROM dpl_spend WHERE "
        "scope = 'a') WHERE scope = 'b'",
        "INSERT INTO dpl_spend VALUES (0, 'a', 'loss', '1/10')",
    ),
]


@pytest.mark.xfail(strict=True, reason="hrev finding: rowid REPLACE bypasses the SQLite guard")
@pytest.mark.parametrize("tamper", TAMPERS)
def test_a_rowid_replace_cannot_lower_a_spend_total(
    tmp_path: Path, tamper: tuple[str, str]
) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path, CONTRACT, mode="create") as ledger:
        for _ in range(3):
            ledger.release(LOSS, 30.0)
        ledger.release(ReleaseRequest(epoch=0, metric="loss", region="b", cohort=100), 30.0)
        before = ledger.spent(0, "a")
    conn = sqlite3.connect(path, isolation_level=None)
    guard_spend(conn)  # what every dpledger writing connection (and the suite's raw one) has
    lowered = True
    try:
        for sql in tamper:
            conn.execute(sql)
    except sqlite3.Error:
        lowered = False
    finally:
        conn.close()
    with Ledger.open(path, CONTRACT, mode="read") as ledger:
        assert not lowered, f"spend total lowered from {before.text} to {ledger.spent(0, 'a').text}"
