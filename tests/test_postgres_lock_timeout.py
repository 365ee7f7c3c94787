"""The wait for the PostgreSQL ledger lock: the URL's own ``lock_timeout`` is kept.

A user who writes ``options=-c lock_timeout=…`` in the URL chose how long a writer
waits for another; the ledger must not replace that with its own ``timeout_s``. A
``lock_timeout`` from anywhere else (here ``ALTER DATABASE``) is replaced by it.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

from dpledger.approval import ReleaseRequest
from dpledger.errors import StoreError
from dpledger.ledger import Ledger
from dpledger.ledger.postgres import LOCK_KEY, PostgresStore

try:
    from ._stores import CONTRACT
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT

pytestmark = pytest.mark.postgres


def _with_option(url: str, option: str) -> str:
    """``url`` with ``-c option`` added to its ``options`` (keeping its search_path)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["options"] = f"{query.get('options', '')} -c {option}".strip()
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))  # libpq: no "+"


def _lock_timeout(ledger_or_store: Any) -> str:
    store = getattr(ledger_or_store, "_store", ledger_or_store)
    return str(store._conn.execute("SHOW lock_timeout").fetchone()[0])


def test_a_lock_timeout_in_the_url_is_kept_and_bounds_the_wait(pg_url: str) -> None:
    url = _with_option(pg_url, "lock_timeout=250")
    with Ledger.open(url, CONTRACT, mode="create") as ledger:
        assert _lock_timeout(ledger) == "250ms"
        ledger.release(ReleaseRequest(epoch=0, metric="loss", region="a", cohort=1000), 30.0)
    for mode in ("write", "read"):
        with Ledger.open(url, CONTRACT, mode=mode) as ledger:
            assert _lock_timeout(ledger) == "250ms"
    # behaviour: a second writer gives up after the URL's 250 ms, not the store's 5 s
    store = PostgresStore(url, "write", timeout_s=5)
    try:
        with psycopg.connect(pg_url) as holder:
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            started = time.monotonic()
            refused = pytest.raises(StoreError, match=r"lock for over 250ms \(the lock_timeout")
            with refused, store.write([0]):
                pytest.fail("the lock was held by another session")  # pragma: no cover
            assert 0.2 <= time.monotonic() - started < 3
            holder.rollback()
        store._reconnect()  # a new session keeps it too
        assert _lock_timeout(store) == "250ms"
    finally:
        store.close()


def test_without_one_in_the_url_the_ledger_sets_its_own(pg_url: str) -> None:
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        assert _lock_timeout(ledger) == "1min"  # the default timeout_s=60
    store = PostgresStore(pg_url, "create", timeout_s=0.3)
    try:
        assert _lock_timeout(store) == "300ms"
    finally:
        store.close()


def test_a_lock_timeout_from_the_database_settings_is_replaced(pg_server: Any) -> None:
    url = pg_server.create_database()  # ALTER DATABASE must not reach other tests' sessions
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            dbname = urlsplit(url).path.lstrip("/")
            conn.execute(f"ALTER DATABASE \"{dbname}\" SET lock_timeout = '123ms'")
        with psycopg.connect(url, autocommit=True) as conn:  # the setting is in force
            assert conn.execute("SHOW lock_timeout").fetchone() == ("123ms",)
        store = PostgresStore(url, "create", timeout_s=2)
        try:
            assert _lock_timeout(store) == "2s"
        finally:
            store.close()
    finally:
        pg_server.drop(url)
