"""Review 42, diff 3: ``create`` on PostgreSQL now builds the guards with ``pgsql.RESTORE``,
which replaces a guard function of dpledger's name left in the schema with another body.
Replacing a function needs its owner: a creator that is not (the function was left by
another role) failed with PostgreSQL's "must be owner of function", the whole function's
DDL line by line, and the writer's advice "GRANT a writer SELECT, INSERT and UPDATE on
them" (for tables that did not exist yet) — the message diff 2 fixed for ``migrate``
(c9ba968), one step to the side. The refusal itself is right (nothing is created);
its message now says what the role lacks and what to do, the exit code stays 2.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from _pg_roles import login_roles
from _stores import CONTRACT, CONTRACT_POLICY

from dpledger import Ledger
from dpledger.cli.main import main
from dpledger.errors import StoreError
from dpledger.ledger.postgres import PostgresStore

pytestmark = pytest.mark.postgres

NO_OP = (
    "CREATE FUNCTION dpl_spend_never_decreases() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$"
)


@pytest.fixture
def creator_role(pg_url: str) -> Iterator[str]:
    """A login role that may create tables in the schema (not a superuser)."""
    with login_roles(pg_url, 1) as names:
        yield names[0]


def test_create_over_another_roles_guard_function_says_what_to_do(
    pg_url: str, creator_role: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(NO_OP)  # left in the schema by another role (here the admin)
    url = pg_url.replace("postgres@", f"{creator_role}@", 1)
    with pytest.raises(StoreError) as failed, Ledger.open(url, CONTRACT, mode="create") as led:
        led.init()
    text = str(failed.value)
    assert "must be owner of function dpl_spend_never_decreases" in text
    assert "GRANT a writer" not in text  # was: the writer's advice, for no table yet
    assert "CREATE OR REPLACE FUNCTION" not in text  # was: the DDL, line by line
    assert "nothing was created" in text
    with psycopg.connect(pg_url, autocommit=True) as admin:
        assert admin.execute("SELECT to_regclass('dpl_meta')").fetchall() == [(None,)]
    policy = tmp_path / "policy.toml"
    policy.write_text(CONTRACT_POLICY)
    assert main(["ledger", "init", "--policy", str(policy), "--ledger", url]) == 2
    err = capsys.readouterr().err
    assert "GRANT a writer" not in err
    assert "owner" in err


def test_a_creator_racing_another_roles_creator_is_told_to_open_it_again(
    pg_url: str, creator_role: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = pg_url.replace("postgres@", f"{creator_role}@", 1)
    late = PostgresStore(url, "create")  # found no ledger as it opened
    try:
        PostgresStore(pg_url, "create").create({})  # another role's creator, meanwhile
        seen = iter([False])  # the late creator checked just before the other committed
        real = late.exists
        monkeypatch.setattr(late, "exists", lambda: next(seen, True) and real())
        with pytest.raises(StoreError, match="must be owner of table") as failed:
            late.create({})
        assert "if another role created the ledger meanwhile, open it again" in str(failed.value)
    finally:
        late.close()
