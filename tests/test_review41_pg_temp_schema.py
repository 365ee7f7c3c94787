"""Review 41 (pg): a writer never creates a ledger in the session's temporary schema.

With ``pg_temp`` first in the URL's ``search_path`` (``?options=-c search_path=pg_temp,
team``), PostgreSQL creates unqualified tables as temporary tables, which vanish when the
session ends. Where the append-only trigger functions already resolve in a schema further
down the path (``team`` keeps them after its ledger tables were dropped), the new ledger
was created in ``pg_temp_N``: every session started from a fresh, empty budget and spent
it whole, and ``verify`` passed — the PostgreSQL twin of the ``:memory:`` ledger the CLI
refuses. Creating in a temporary schema is now a StoreError, and nothing is recorded.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, urlsplit

import psycopg
import pytest

from dpledger.approval import ReleaseRequest
from dpledger.errors import BudgetExceeded, StoreError
from dpledger.ledger import Ledger

try:
    from ._stores import CONTRACT
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT

pytestmark = pytest.mark.postgres


def _loss() -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric="loss", region="a", cohort=1000)


def test_a_ledger_is_never_created_in_the_session_s_temporary_schema(pg_url: str) -> None:
    schema = dict(parse_qsl(urlsplit(pg_url).query))["options"].split("=", 1)[1]
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.init()  # leaves dpledger's trigger functions in the schema
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("DROP TABLE dpl_meta, dpl_entries, dpl_spend, dpl_policies")
    temp_first = pg_url.split("?")[0] + "?options=" + quote(f"-c search_path=pg_temp,{schema}")
    released = 0
    for _ in range(2):  # two sessions, one epoch budget (ten releases of ε 0.1)
        with Ledger.open(temp_first, CONTRACT, mode="create") as ledger:
            for _ in range(10):
                try:
                    ledger.release(_loss(), 30.0)
                except (StoreError, BudgetExceeded):
                    break
                released += 1
    assert released == 0
    with (
        pytest.raises(StoreError, match="temporary"),
        Ledger.open(temp_first, CONTRACT, mode="create") as ledger,
    ):
        ledger.init()
