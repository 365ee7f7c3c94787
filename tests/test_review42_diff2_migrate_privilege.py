"""Review 42, diff 2: ``dpledger ledger migrate`` run by a role that may write the ledger
but does not own it (a writer role, as the dropped-trigger refusal's own advice names the
URL it was given) failed re-creating the triggers with PostgreSQL's "permission denied for
table dpl_spend", or, for a guard function left with another body and another owner,
"must be owner of function dpl_spend_never_decreases" — followed by the whole function's
DDL and the writer's advice "GRANT a writer SELECT, INSERT and UPDATE on them", which the
role already had. ``CREATE TRIGGER`` and ``CREATE OR REPLACE FUNCTION`` need the owner:
the error now says so, without the DDL; nothing is changed, the exit code stays 2.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from _pg_roles import login_roles, schema_of
from _stores import CONTRACT

from dpledger import Ledger, ReleaseRequest
from dpledger.cli.main import main
from dpledger.errors import StoreError
from dpledger.ledger.migrate import migrate

pytestmark = pytest.mark.postgres

LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)
NO_OP = (
    "CREATE OR REPLACE FUNCTION dpl_spend_never_decreases() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$"
)


@pytest.fixture
def writer_role(pg_url: str) -> Iterator[str]:
    """A login role that may write the ledger's tables (not their owner)."""
    with login_roles(pg_url, 1, create=False) as names:
        yield names[0]


def _state(url: str) -> list[Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = [
            conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
            for t in ("dpl_meta", "dpl_entries", "dpl_spend", "dpl_policies")
        ]
        rows.append(conn.execute("SELECT tgname FROM pg_trigger ORDER BY 1").fetchall())
        functions = "SELECT proname, prosrc FROM pg_proc WHERE proname LIKE 'dpl%' ORDER BY 1"
        rows.append(conn.execute(functions).fetchall())
        return rows


@pytest.mark.parametrize("case", ["table", "function"])
def test_migrate_by_a_role_that_does_not_own_the_ledger_says_so(
    pg_url: str, writer_role: str, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(LOSS, 30.0)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(
            f'GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA "{schema_of(pg_url)}" '
            f'TO "{writer_role}"'
        )
        admin.execute("DROP TRIGGER dpl_spend_no_decrease ON dpl_spend")
        admin.execute("DROP TRIGGER dpl_spend_no_truncate ON dpl_spend")
        if case == "function":  # the role may create triggers; the function is not its own
            admin.execute(f'GRANT TRIGGER ON dpl_spend TO "{writer_role}"')
            admin.execute(f'GRANT CREATE ON SCHEMA "{schema_of(pg_url)}" TO "{writer_role}"')
            admin.execute(NO_OP)
    before = _state(pg_url)
    url = pg_url.replace("postgres@", f"{writer_role}@", 1)
    with pytest.raises(StoreError) as failed:
        migrate(url)
    text = str(failed.value)
    assert "owner" in text  # what the role lacks
    assert ("must be owner of function" in text) == (case == "function")
    assert "GRANT a writer" not in text  # was: the writer's advice, which it had already
    assert "CREATE TRIGGER dpl_spend" not in text  # was: the DDL, line by line
    assert "CREATE OR REPLACE FUNCTION dpl_spend" not in text
    assert "nothing was changed by the step that failed (the ledger is at schema 4)" in text
    assert _state(pg_url) == before
    assert main(["ledger", "migrate", "--ledger", url]) == 2  # an error, as before
    assert "owner" in capsys.readouterr().err
