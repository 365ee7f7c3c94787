"""Review 41 diff 2: a PostgreSQL verify whose read waits out its lock_timeout, or is
cancelled by a hot standby's recovery conflict, is no verdict — not "FAILED".

fc1c18e narrowed verify's lost-session rule to SQLSTATE classes 08 and 57 (and a broken
session) so that class 58 (a table's storage failing) fails the verification. But the
rule had taken every ``OperationalError`` for a lost session, and class 08/57 are not all
of them that say nothing about the ledger: a lock wait cut by ``lock_timeout`` (55P03:
a migration or ``VACUUM FULL`` holding the table, "a timeout the role sets" in
docs/operations.md), a standby's "canceling statement due to conflict with recovery"
(40001, an auditor reading a replica), a deadlock (40P01), the server out of memory or
temporary disk (class 53). Each now ended in "store unreadable: ... nothing was recorded
by this statement; retry" as a failed verification (``ledger verify``: FAILED, exit 1)
of a sound ledger. Only the ledger's own storage (class 58) and what is not an
``OperationalError`` (XX001 data_corrupted, ...) say the ledger is damaged.
"""

from __future__ import annotations

import psycopg
import pytest

from dpledger.approval import ReleaseRequest
from dpledger.errors import LedgerChanged
from dpledger.ledger import Ledger, audit

try:
    from ._stores import CONTRACT
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT

pytestmark = pytest.mark.postgres


def _ledger(pg_url: str) -> None:
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(ReleaseRequest(epoch=0, metric="loss", region="a", cohort=1000), 30.0)


def test_a_lock_wait_cut_by_lock_timeout_is_no_verdict(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ledger(pg_url)
    monkeypatch.setattr(audit.time, "sleep", lambda s: None)
    short = pg_url + "%20-c%20lock_timeout%3D50ms"  # the client's own lock_timeout is kept
    with psycopg.connect(pg_url) as admin:  # a migration / VACUUM FULL holds the table
        admin.execute("LOCK TABLE dpl_entries IN ACCESS EXCLUSIVE MODE")
        with (
            Ledger.open(short, CONTRACT, mode="read") as ledger,
            pytest.raises(LedgerChanged, match="nothing is wrong with the ledger"),
        ):
            ledger.verify()
        admin.rollback()
    with Ledger.open(pg_url, CONTRACT, mode="read") as ledger:
        assert ledger.verify().ok


_RAISES = """CREATE FUNCTION dpl_read_cancelled() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'canceling statement due to conflict with recovery'
    USING ERRCODE = '{code}';
END $$"""


@pytest.mark.parametrize("code", ["40001", "40P01", "53200"])
def test_a_read_cancelled_for_the_server_s_reasons_is_no_verdict(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, code: str
) -> None:
    """Raised by a view over the entries, as the storage test does (40001 is what a hot
    standby's recovery conflict gives; 53200 out of memory)."""
    _ledger(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("ALTER TABLE dpl_entries RENAME TO dpl_entries_stored")
        admin.execute(_RAISES.replace("{code}", code))
        admin.execute(
            "CREATE VIEW dpl_entries AS SELECT * FROM dpl_entries_stored WHERE dpl_read_cancelled()"
        )
    monkeypatch.setattr(audit.time, "sleep", lambda s: None)
    with (
        Ledger.open(pg_url, CONTRACT, mode="read") as ledger,
        pytest.raises(LedgerChanged, match="nothing is wrong with the ledger"),
    ):
        ledger.verify()
