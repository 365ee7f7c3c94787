"""Review 41 diff 2: a new session whose search_path check fails, but stays open, is used
by the next call without the check.

A PostgreSQL store that lost its session opens a new one and asks where it finds the
ledger's tables: elsewhere (the role's search_path changed meanwhile) is refused on every
later call (review 41). 6f2c01a turned a failure of that question into a StoreError. But
the new session stays the store's connection, alive and not broken, when the failure
ends the statement and not the session (an operator's ``pg_cancel_backend``, a
``statement_timeout``, the server out of memory): the next call uses it as it is, never
asks again, and records its release in whatever ledger the new search_path finds — another
team's ledger, charged to its budget and chained into its entries.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from dpledger.approval import ReleaseRequest
from dpledger.errors import StoreError
from dpledger.ledger import Ledger
from dpledger.ledger import postgres as pg_store

try:
    from ._stores import CONTRACT
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT

pytestmark = pytest.mark.postgres

_CANCELLED = (
    "DO $$ BEGIN RAISE EXCEPTION 'canceling statement due to user request' "
    "USING ERRCODE = 'query_canceled'; END $$"
)


def _loss(epoch: int = 0) -> ReleaseRequest:
    return ReleaseRequest(epoch=epoch, metric="loss", region="a", cohort=1000)


def _count(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SELECT count(*) FROM dpl_entries").fetchall()[0][0])


def test_a_failed_check_of_a_new_session_is_made_again_by_the_next_call(
    pg_url: str, pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = pg_server.create_schema()  # another team's ledger, in the same database
    try:
        with Ledger.open(other, CONTRACT, mode="create") as theirs:
            theirs.release(_loss(), 30.0)
        with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
            ledger.release(_loss(), 30.0)
            store: Any = ledger._store
            store._url = other  # the role's search_path now finds the other ledger
            found_sql = pg_store.found_sql
            once: list[bool] = [True]

            def cancelled_once(table: str) -> str:
                return _CANCELLED if once and once.pop() else found_sql(table)

            monkeypatch.setattr(pg_store, "found_sql", cancelled_once)
            with psycopg.connect(pg_url, autocommit=True) as admin:  # the session is lost
                admin.execute(
                    "SELECT pg_terminate_backend(%s, 60000)", (store._conn.info.backend_pid,)
                )
            with pytest.raises(StoreError):
                ledger.release(_loss(1), 30.0)  # the new session's check is cancelled
            with pytest.raises(StoreError, match="search_path changed"):
                ledger.release(_loss(2), 30.0)  # so the next call checks again
        assert _count(other) == 1  # nothing of this ledger's in the other team's
        assert _count(pg_url) == 1
    finally:
        pg_server.drop(other)
