"""Review 42, diff 3: a guard function another role owns, in the ledger's own schema.

4d2b2f5 made ``create`` and ``migrate`` never reuse a guard function of dpledger's name
found in another schema, "whose owner could then make the spend guard RETURN NEW". One step
to the side, an *intact* copy in the ledger's own schema that another role owns (a role
with CREATE on the schema planted it before the ledger was created) was kept: the new
ledger's triggers ran a function that role may replace at will. Now ``RESTORE`` treats a
function whose owner is not the table's as one to replace (which needs its owner: the
creator is refused, told to have it dropped, nothing created), and the trigger check
counts an own trigger running another owner's function as a changed one (a writer
refuses it; ``ALTER FUNCTION … OWNER TO`` the tables' owner, or drop and migrate).
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from _pg_roles import login_roles
from _stores import CONTRACT

from dpledger import Ledger
from dpledger.errors import LedgerCorrupted, StoreError
from dpledger.ledger.pgsql import SPEND_GUARD

pytestmark = pytest.mark.postgres

OWNERS = (
    "SELECT DISTINCT p.proowner = c.relowner FROM pg_trigger t JOIN pg_proc p ON "
    "p.oid = t.tgfoid JOIN pg_class c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal"
)


@pytest.fixture
def roles(pg_url: str) -> Iterator[tuple[str, str]]:
    """Two login roles (not superusers) that may create in the schema."""
    with login_roles(pg_url, 2) as (creator, other):
        yield creator, other


def test_a_new_ledgers_guards_never_run_a_function_another_role_owns(
    pg_url: str, roles: tuple[str, str]
) -> None:
    creator, other = roles
    body = SPEND_GUARD.split("$fn$")[1]
    with psycopg.connect(pg_url.replace("postgres@", f"{other}@", 1), autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION dpl_spend_never_decreases() RETURNS trigger "
            f"LANGUAGE plpgsql AS $fn${body}$fn$"
        )
    url = pg_url.replace("postgres@", f"{creator}@", 1)
    with pytest.raises(StoreError) as refused:
        Ledger.open(url, CONTRACT, mode="create").init()
    said = str(refused.value)
    assert "dpl_spend_never_decreases" in said or "owner" in said, said
    assert "GRANT a writer" not in said, said
    with psycopg.connect(pg_url, autocommit=True) as admin:  # nothing was created
        assert admin.execute("SELECT to_regclass('dpl_meta')").fetchall() == [(None,)]
        assert not admin.execute(OWNERS).fetchall()


def test_an_own_trigger_running_another_roles_function_refuses_writers(
    pg_url: str, roles: tuple[str, str]
) -> None:
    _, other = roles
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.init()
    with psycopg.connect(pg_url, autocommit=True) as admin:  # that role may now replace it
        admin.execute(f'ALTER FUNCTION dpl_spend_never_decreases() OWNER TO "{other}"')
    with pytest.raises(LedgerCorrupted, match="another schema's or owner's function"):
        Ledger.open(pg_url, CONTRACT, mode="write")
    with Ledger.open(pg_url, CONTRACT, mode="read") as reader:
        assert not reader.verify().ok
    with psycopg.connect(pg_url, autocommit=True) as admin:  # the way out: owned again
        admin.execute("ALTER FUNCTION dpl_spend_never_decreases() OWNER TO CURRENT_USER")
    with Ledger.open(pg_url, CONTRACT, mode="write") as writer:
        assert writer.verify().ok
