"""Review 42, diff 3: a read handle's dry run (``dpledger check``) now reads the ledger's
triggers as a writer does (7e7ec55). A reader role that may SELECT the ledger's tables but
not PostgreSQL's catalog ``pg_proc`` (a hardened server revoked it from PUBLIC) checked
before and now fails — it cannot tell whether the release would be refused, so failing
is right — but with the store's advice for the ledger's *tables*: "the role lacks a
privilege on the ledger's tables …: GRANT … (a reader SELECT)", which it had. It now
names the catalogs it could not read (``verify``'s "store unreadable" problem too).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from _stores import CONTRACT

from dpledger import Ledger, ReleaseRequest
from dpledger.errors import StoreError

pytestmark = pytest.mark.postgres

LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)


@pytest.fixture
def catalog_blind_reader(pg_server: Any) -> Iterator[str]:
    """A URL of a reader role on a ledger in a database of its own whose pg_proc only
    the superuser reads (the revocation is database-wide: not the shared test database)."""
    url = pg_server.create_database()
    name = f"r_{uuid.uuid4().hex[:12]}"
    with Ledger.open(url, CONTRACT, mode="create") as ledger:
        ledger.release(LOSS, 30.0)
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{name}" LOGIN')
        admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{name}"')
        admin.execute("REVOKE SELECT ON pg_catalog.pg_proc FROM PUBLIC")
    yield url.replace("postgres@", f"{name}@", 1)
    pg_server.drop(url)
    with psycopg.connect(pg_server.url(pg_server.maintenance_db), autocommit=True) as admin:
        admin.execute(f'DROP ROLE "{name}"')


def test_a_reader_that_cannot_read_the_catalog_is_told_which(catalog_blind_reader: str) -> None:
    with Ledger.open(catalog_blind_reader, CONTRACT, mode="read") as reader:
        assert reader.spent(0, "a").amount > 0  # it reads the ledger's tables
        with pytest.raises(StoreError, match="pg_proc") as failed:
            reader.check(LOSS, 30.0)
    text = str(failed.value)
    assert "lacks a privilege on the ledger's tables" not in text  # was: which it had
    assert "PostgreSQL's catalogs" in text
