"""Stop 41: the service's PostgreSQL key store, as review 41 (pg) made the ledger's store.

- With ``pg_temp`` first in the URL's search_path, the key store's tables were created as
  temporary tables: every key vanished with the session (and with it any revocation), and
  a second replica saw none. Creating there is a StoreError; nothing is created.
- A session the store opens again after a failure reads the role's search_path as it is
  now: after ``ALTER ROLE … SET search_path`` it read another deployment's keys (a key of
  theirs authenticated here). It is refused, on every later call.
"""

from __future__ import annotations

from urllib.parse import quote

import psycopg
import pytest
from test_review41_pg_reconnect_search_path import _schema

from dpledger.errors import StoreError
from dpledger.service.keys import Scopes
from dpledger.service.store import ServiceStore

pytestmark = pytest.mark.postgres

READ = Scopes(("read",), None, None)


def test_a_key_store_is_never_created_in_the_session_s_temporary_schema(pg_url: str) -> None:
    temp_first = (
        pg_url.split("?")[0] + "?options=" + quote(f"-c search_path=pg_temp,{_schema(pg_url)}")
    )
    with pytest.raises(StoreError, match="temporary schema"):
        ServiceStore.open(temp_first, create=True)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        assert admin.execute("SELECT to_regclass('dpl_svc_meta')").fetchone() == (None,)


def test_a_new_session_that_finds_another_key_store_reads_nothing(
    pg_url: str, pg_server: object, pg_role: str
) -> None:
    other_url = pg_server.create_schema()  # type: ignore[attr-defined]
    try:
        with ServiceStore.open(pg_url, create=True) as mine:
            mine.create_key("mine", READ)
        with ServiceStore.open(other_url, create=True) as other:
            _, theirs = other.create_key("theirs", READ)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'ALTER ROLE "{pg_role}" SET search_path = "{_schema(pg_url)}"')
        url = f"postgresql://{pg_role}@{pg_url.split('@', 1)[1].split('?')[0]}"
        with ServiceStore.open(url) as store:
            assert [k.name for k in store.list_keys()] == ["mine"]
            pid = store._conn.info.backend_pid  # type: ignore[attr-defined]
            with psycopg.connect(pg_url, autocommit=True) as admin:
                admin.execute(f'ALTER ROLE "{pg_role}" SET search_path = "{_schema(other_url)}"')
                admin.execute("SELECT pg_terminate_backend(%s, 60000)", (pid,))
            with pytest.raises(StoreError, match="search_path changed"):
                store.key(theirs.key_id)
            with pytest.raises(StoreError, match="search_path changed"):
                store.list_keys()  # and so on every later call
    finally:
        pg_server.drop(other_url)  # type: ignore[attr-defined]


def test_a_session_opened_again_on_the_same_store_goes_on(pg_url: str) -> None:
    with ServiceStore.open(pg_url, create=True) as store:
        store.create_key("mine", READ)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            pid = store._conn.info.backend_pid  # type: ignore[attr-defined]
            admin.execute("SELECT pg_terminate_backend(%s, 60000)", (pid,))
        assert [k.name for k in store.list_keys()] == ["mine"]
