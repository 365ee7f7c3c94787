"""Review 41 (pg): a write the session may never make says so, not "retry".

A writer whose role sets ``default_transaction_read_only = on`` (or that is pointed at a
hot standby, whose every transaction is read-only), and a role without the rights to
write the ledger's tables, met the server's refusal as "…; nothing was recorded by this
statement; retry, or check the server log". Nothing was recorded — but a retry fails
the same way every time. The error now names the cause and what to do instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
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


def _tables(url: str) -> list[list[tuple[Any, ...]]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [
            conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("dpl_meta", "dpl_entries", "dpl_spend", "dpl_policies")
        ]


@pytest.fixture
def role(pg_url: str) -> Iterator[str]:
    name = f"r_{uuid.uuid4().hex[:12]}"
    schema = dict(parse_qsl(urlsplit(pg_url).query))["options"].split("=", 1)[1]
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{name}" LOGIN')
        admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{name}"')
    yield name
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'DROP OWNED BY "{name}"')
        admin.execute(f'DROP ROLE "{name}"')


@pytest.mark.parametrize(
    ("setup", "said"),
    [
        (
            [
                'GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"',
                'ALTER ROLE "{role}" SET default_transaction_read_only = on',
            ],
            "read-only",
        ),
        (['GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"'], "GRANT"),
    ],
    ids=["read-only-default", "select-only"],
)
def test_a_write_the_session_may_never_make_says_why_and_not_retry(
    pg_url: str, role: str, setup: list[str], said: str
) -> None:
    schema = dict(parse_qsl(urlsplit(pg_url).query))["options"].split("=", 1)[1]
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(ReleaseRequest(epoch=0, metric="loss", region="a", cohort=1000), 30.0)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        for statement in setup:
            admin.execute(statement.format(schema=schema, role=role))
    before = _tables(pg_url)
    url = pg_url.replace("postgres@", f"{role}@", 1)
    with Ledger.open(url, CONTRACT) as ledger:
        request = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=1000, release_id="n")
        with pytest.raises(StoreError) as failed:
            ledger.release_round([(request, 30.0)])
    text = str(failed.value)
    assert "nothing was recorded" in text
    assert said in text
    assert "retry" not in text
    assert _tables(pg_url) == before
