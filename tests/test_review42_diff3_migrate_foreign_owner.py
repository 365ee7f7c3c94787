"""Review 42, diff 3: ``migrate``'s permission error (c9ba968) told every role refused by
PostgreSQL to "run it as the role that owns them (the one that created the ledger, or a
superuser)". When the function refused is a guard function of dpledger's name that
another role left in (or planted in) the ledger's schema — a schema-2 or -3 ledger never
had the spend guard, so any role with CREATE on the schema could — the role running
migrate *is* the one that created the ledger: the advice sent it back to itself. Here a
2→4 migration stops half way (2→3 committed, 3→4 refused): the message must say the
ledger is at schema 3 and what to do about that function (its owner drops it).
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from _pg_roles import login_roles
from _stores import CONTRACT

from dpledger import Ledger, ReleaseRequest
from dpledger.cli.main import main
from dpledger.errors import StoreError
from dpledger.ledger.migrate import migrate

pytestmark = pytest.mark.postgres

LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)
NO_OP = (
    "CREATE FUNCTION dpl_spend_never_decreases() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$"
)


@pytest.fixture
def roles(pg_url: str) -> Iterator[tuple[str, str]]:
    """Two login roles (not superusers) that may create in the schema."""
    with login_roles(pg_url, 2) as (creator, other):
        yield creator, other


def test_migrate_by_the_ledgers_creator_names_the_function_another_role_owns(
    pg_url: str, roles: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    creator, other = roles
    url = pg_url.replace("postgres@", f"{creator}@", 1)
    with Ledger.open(url, CONTRACT, mode="create") as ledger:
        ledger.release(LOSS, 30.0)
    with psycopg.connect(url, autocommit=True) as conn:  # a schema-2 ledger: no spend guard
        conn.execute("DROP FUNCTION dpl_spend_never_decreases() CASCADE")
        conn.execute("UPDATE dpl_meta SET value = '2' WHERE key = 'schema_version'")
    with psycopg.connect(pg_url.replace("postgres@", f"{other}@", 1), autocommit=True) as conn:
        conn.execute(NO_OP)
    with pytest.raises(StoreError) as failed:
        migrate(url)
    text = str(failed.value)
    assert "must be owner of function dpl_spend_never_decreases" in text
    assert "nothing was changed by the step that failed (the ledger is at schema 3)" in text
    assert "another role" in text  # was only: run it as the one that created the ledger
    assert "drop it" in text
    assert main(["ledger", "migrate", "--ledger", url]) == 2  # an error, as before
    assert "drop it" in capsys.readouterr().err
