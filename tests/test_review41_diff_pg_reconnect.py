"""Review 41 diff (dB): the check a PostgreSQL session opened again makes (where does it
find the ledger's tables?) must not lie, and must not leak psycopg's own error.

1. A ledger whose tables were dropped, met by a new session (the old one was lost): it
   said "its search_path changed ... open the ledger again" — the URL names the schema,
   nothing changed it, and opening again with ``mode='create'`` starts a fresh budget.
   Without the lost session the same ledger is "damaged ... restore it from a backup".
2. The new session failing at that check (a failover still under way) raised a bare
   ``psycopg.errors.AdminShutdown`` out of ``Ledger.verify`` (``ledger verify``: exit 3,
   an internal error) instead of a session failure verify reads again after.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from dpledger.approval import ReleaseRequest
from dpledger.errors import StoreError
from dpledger.ledger import Ledger, audit
from dpledger.ledger import postgres as pg_store

try:
    from ._stores import CONTRACT
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT

pytestmark = pytest.mark.postgres


def _loss(epoch: int = 0) -> ReleaseRequest:
    return ReleaseRequest(epoch=epoch, metric="loss", region="a", cohort=1000)


def _kill(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 60000)", (pid,))


def test_a_dropped_ledger_met_by_a_new_session_is_not_called_a_changed_search_path(
    pg_url: str,
) -> None:
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(_loss(), 30.0)
        store: Any = ledger._store
        with psycopg.connect(pg_url, autocommit=True) as admin:
            for table in ("dpl_spend", "dpl_entries", "dpl_policies", "dpl_meta"):
                admin.execute(f"DROP TABLE {table} CASCADE")
        _kill(pg_url, store._conn.info.backend_pid)
        with pytest.raises(StoreError) as caught:
            ledger.release(_loss(), 30.0)
    text = str(caught.value)
    assert "nothing was recorded" in text
    assert "dropped" in text
    assert "backup" in text
    assert "open the ledger again" not in text


def test_a_new_session_that_fails_at_once_is_read_again_not_a_psycopg_error(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        for epoch in range(2):
            ledger.release(_loss(epoch), 30.0)
    connect = pg_store.PostgresStore._connect
    doomed: list[bool] = []

    def failing_over(self: Any) -> Any:
        conn = connect(self)
        if doomed and doomed.pop():  # the server ends the next new session at once too
            _kill(pg_url, conn.info.backend_pid)
        return conn

    monkeypatch.setattr(pg_store.PostgresStore, "_connect", failing_over)
    monkeypatch.setattr(audit.time, "sleep", lambda s: None)
    with Ledger.open(pg_url, CONTRACT, mode="read") as ledger:
        store: Any = ledger._store
        check = audit._check_entry
        killed: list[int] = []

        def checked(*args: Any) -> None:
            if not killed:
                killed.append(store._conn.info.backend_pid)
                doomed.append(True)
                _kill(pg_url, killed[0])
            check(*args)

        monkeypatch.setattr(audit, "_check_entry", checked)
        report = ledger.verify()
    assert killed
    assert not doomed
    assert report.ok, report.problems
    assert report.entries_checked == 2


def test_a_session_lost_at_the_writer_s_trigger_check_is_a_store_error(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's trigger check (now ``pgsql.trigger_refusal``) read through the bare
    connection, outside the session setup's error handling: a session lost there (a
    failover as the writer opens, or opens again) was a bare psycopg error (exit 3)."""
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.init()
    refusal = pg_store.trigger_refusal

    def lost_first(conn: Any, location: str) -> Any:
        _kill(pg_url, conn.info.backend_pid)
        return refusal(conn, location)

    monkeypatch.setattr(pg_store, "trigger_refusal", lost_first)
    with pytest.raises(StoreError, match="cannot set up the PostgreSQL ledger session"):
        Ledger.open(pg_url, CONTRACT, mode="write")
