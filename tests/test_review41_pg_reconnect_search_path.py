"""Review 41 (pg): a session opened again after a failure writes to the same ledger or none.

dpledger's tables are named unqualified, so a session finds them through its
``search_path``. A writer whose session dies (a failover, a restart, an idle timeout)
opens a new one transparently — and that session reads the role's (or database's)
``search_path`` as it is *now*. After ``ALTER ROLE … SET search_path`` moved it to
another ledger's schema, the next release was checked, charged and recorded in that
other ledger, and the handle went on reading it as its own: the budget of the ledger it
was opened on never saw the release. A new session that finds the ledger's tables in
another schema than the handle opened is a StoreError, and nothing is recorded.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import psycopg
import pytest

from dpledger.approval import ReleaseRequest
from dpledger.errors import StoreError
from dpledger.ledger import Ledger

try:
    from ._stores import CONTRACT
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT

pytestmark = pytest.mark.postgres


def _schema(url: str) -> str:
    return dict(parse_qsl(urlsplit(url).query))["options"].split("=", 1)[1]


def _loss(epoch: int = 0) -> ReleaseRequest:
    return ReleaseRequest(epoch=epoch, metric="loss", region="a", cohort=1000)


def test_a_new_session_that_finds_another_ledger_writes_nothing(
    pg_url: str, pg_server: object, pg_role: str
) -> None:
    other_url = pg_server.create_schema()  # type: ignore[attr-defined]
    try:
        mine, other = _schema(pg_url), _schema(other_url)
        with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
            ledger.release(_loss(), 30.0)
        with Ledger.open(other_url, CONTRACT, mode="create") as ledger:
            ledger.release(_loss(5), 30.0)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'ALTER ROLE "{pg_role}" SET search_path = "{mine}"')
        url = f"postgresql://{pg_role}@{pg_url.split('@', 1)[1].split('?')[0]}"
        with Ledger.open(url, CONTRACT) as ledger:
            assert len(ledger) == 1
            pid = ledger._store._conn.info.backend_pid  # type: ignore[attr-defined]
            with psycopg.connect(pg_url, autocommit=True) as admin:
                admin.execute(f'ALTER ROLE "{pg_role}" SET search_path = "{other}"')
                admin.execute("SELECT pg_terminate_backend(%s, 60000)", (pid,))
            with pytest.raises(StoreError, match="schema"):
                ledger.release(_loss(), 30.0)
            with pytest.raises(StoreError, match="schema"):
                ledger.release(_loss(), 30.0)  # and so on every later call
        with Ledger.open(pg_url, CONTRACT, mode="read") as ledger:
            assert len(ledger) == 1
        with Ledger.open(other_url, CONTRACT, mode="read") as ledger:
            assert len(ledger) == 1
            assert ledger.verify().ok
    finally:
        pg_server.drop(other_url)  # type: ignore[attr-defined]


def test_a_session_opened_again_on_the_same_ledger_goes_on(pg_url: str) -> None:
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(_loss(), 30.0)  # created by this handle: then found again
        with psycopg.connect(pg_url, autocommit=True) as admin:
            pid = ledger._store._conn.info.backend_pid  # type: ignore[attr-defined]
            admin.execute("SELECT pg_terminate_backend(%s, 60000)", (pid,))
        assert ledger.release(_loss(), 30.0).entry_id == 2
        assert ledger.verify().ok
