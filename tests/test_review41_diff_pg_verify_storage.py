"""Review 41 diff (dB): a PostgreSQL ledger whose storage fails verify's read is a failed
verification, not "nothing is wrong with the ledger; read again".

Review 41 made a session lost part way through ``verify`` a :class:`LedgerChanged` (read
again, no verdict) — but it took every ``psycopg.OperationalError`` for a lost session.
PostgreSQL's class 58 (system error) is one too: a ledger table whose data file is gone
or unreadable (EIO) fails every read with ``could not open file "base/…"`` (58P01) or
``could not read block … Input/output error`` (58030).
``verify`` read it five times, then raised "nothing is wrong with the ledger, nothing was
written; read again" (``ledger verify``: exit 2, no verdict); before, it failed the
verification ("store unreadable"), as it must: the ledger's own storage is damaged.
Only a connection failure (class 08), an operator's intervention (class 57: killed,
shut down, a timeout) or a session that broke is a read to do again.
"""

from __future__ import annotations

import psycopg
import pytest

from dpledger.approval import ReleaseRequest
from dpledger.errors import LedgerChanged
from dpledger.ledger import Ledger, audit

try:
    from ._stores import CONTRACT, server_gone
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT, server_gone

pytestmark = pytest.mark.postgres


_IO_ERROR = """CREATE FUNCTION dpl_storage_fails() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'could not read block 0 in file "base/5/16384": Input/output error'
    USING ERRCODE = 'io_error';
END $$"""


def test_a_ledger_table_whose_storage_fails_fails_verification(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the server says when a table's data file cannot be read (58030, as EIO on a
    bad sector gives, or 58P01 for a file gone), raised here by a view over the entries:
    deleting the real file would make the shared test server's checkpointer PANIC."""
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        for epoch in range(2):
            request = ReleaseRequest(epoch=epoch, metric="loss", region="a", cohort=1000)
            ledger.release(request, 30.0)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("ALTER TABLE dpl_entries RENAME TO dpl_entries_stored")
        admin.execute(_IO_ERROR)
        admin.execute(
            "CREATE VIEW dpl_entries AS SELECT * FROM dpl_entries_stored WHERE dpl_storage_fails()"
        )
    monkeypatch.setattr(audit.time, "sleep", lambda s: None)
    with Ledger.open(pg_url, CONTRACT, mode="read") as ledger:
        report = ledger.verify()
    assert not report.ok
    assert any("Input/output error" in p for p in report.problems), report.problems


def test_a_server_that_cannot_be_reached_again_is_no_verdict(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side of the line: a session lost and a server that refuses the new one
    (a client-side error, no SQLSTATE) is still a read to do again, never "FAILED"."""
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(ReleaseRequest(epoch=0, metric="loss", region="a", cohort=1000), 30.0)
    monkeypatch.setattr(audit.time, "sleep", lambda s: None)
    with Ledger.open(pg_url, CONTRACT, mode="read") as ledger:
        with server_gone(ledger, pg_url), pytest.raises(LedgerChanged, match="nothing is wrong"):
            ledger.verify()
        assert ledger.verify().ok  # it is back
