"""Review 42, diff 2: ``pgsql.RESTORE`` (``ledger migrate``, and now ``create``) kept a
guard function found by ``to_regprocedure`` anywhere on the search_path. With the
ledger's own ``dpl_spend_never_decreases`` gone (``DROP FUNCTION … CASCADE`` drops its
triggers too) and a same-named copy in another schema further down the path, migrate
re-created the ledger's triggers on that schema's function: whoever owns that schema could
then make it ``RETURN NEW``, and a lowered spend total was taken. The function must be
the ledger schema's own; one elsewhere is not reused.
"""

from __future__ import annotations

import uuid
from urllib.parse import parse_qsl, urlsplit

import pytest
from _stores import CONTRACT, StoreUnderTest

from dpledger import Ledger, ReleaseRequest
from dpledger.ledger.migrate import migrate
from dpledger.ledger.pgsql import SPEND_GUARD

LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)
BOUND = (
    "SELECT DISTINCT n.nspname FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
    "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE t.tgrelid = 'dpl_spend'::regclass "
    "AND NOT t.tgisinternal"
)


@pytest.mark.parametrize("store", ["postgres"], indirect=True)
def test_migrate_never_binds_the_guard_to_another_schemas_function(
    store: StoreUnderTest,
) -> None:
    schema = dict(parse_qsl(urlsplit(store.target).query))["options"].split("=", 1)[1]
    other = f"o_{uuid.uuid4().hex[:12]}"
    url = store.target.replace(f"search_path%3D{schema}", f"search_path%3D{schema}%2C{other}")
    assert url != store.target
    with Ledger.open(url, CONTRACT, mode="create") as ledger:
        ledger.release(LOSS, 30.0)
    body = SPEND_GUARD.split("$fn$")[1]
    store.raw(f'CREATE SCHEMA "{other}"')
    try:
        store.raw(
            f'CREATE FUNCTION "{other}".dpl_spend_never_decreases() RETURNS trigger '
            f"LANGUAGE plpgsql AS $fn${body}$fn$"
        )
        store.raw("DROP FUNCTION dpl_spend_never_decreases() CASCADE")
        assert migrate(url).restored == ("dpl_spend_no_decrease", "dpl_spend_no_truncate")
        assert store.raw(BOUND) == [(schema,)]  # was: the other schema's function
        store.raw(
            f'CREATE OR REPLACE FUNCTION "{other}".dpl_spend_never_decreases() RETURNS '
            "trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$"
        )
        with pytest.raises(store.db_error, match="never decrease"):  # was: taken
            store.raw("UPDATE dpl_spend SET total = '0'")
        with Ledger.open(url, CONTRACT, mode="write") as writer:
            writer.release(LOSS, 30.0)
            assert writer.verify().ok
    finally:
        store.raw(f'DROP SCHEMA "{other}" CASCADE')
