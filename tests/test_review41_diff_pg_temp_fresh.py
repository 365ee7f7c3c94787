"""Review 41 diff (dB): ``pg_temp`` first in the search_path of a fresh schema is the
temporary-schema refusal, not PostgreSQL's "function dpl_entries_append_only() does not
exist ... retry".

Review 41 refused a ledger created in the session's temporary schema — checked after
every DDL statement had run. In a schema that does not yet hold dpledger's trigger
functions (any first ``ledger init``), the functions are created in ``pg_temp`` too,
where PostgreSQL never looks a function up: the trigger DDL failed first, and the
refusal said "UndefinedFunction … nothing was recorded by this statement; retry, or check
the server log" — a retry meets it again, and nothing named the search_path. The check
now runs right after ``dpl_meta`` is created, before anything else.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, urlsplit

import psycopg
import pytest

from dpledger.errors import StoreError
from dpledger.ledger import Ledger

try:
    from ._stores import CONTRACT
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT

pytestmark = pytest.mark.postgres


def test_a_fresh_schema_behind_pg_temp_is_refused_as_temporary(pg_url: str) -> None:
    schema = dict(parse_qsl(urlsplit(pg_url).query))["options"].split("=", 1)[1]
    temp_first = pg_url.split("?")[0] + "?options=" + quote(f"-c search_path=pg_temp,{schema}")
    with (
        pytest.raises(StoreError, match="temporary schema") as caught,
        Ledger.open(temp_first, CONTRACT, mode="create") as ledger,
    ):
        ledger.init()
    assert "retry" not in str(caught.value)
    with psycopg.connect(pg_url, autocommit=True) as admin:  # nothing was created
        assert admin.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s",
            (schema,),
        ).fetchall() == [(0,)]
