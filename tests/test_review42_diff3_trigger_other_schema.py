"""Review 42, diff 3: 4d2b2f5 stopped ``migrate`` (and ``create``) binding re-created
triggers to a guard function of dpledger's name found in *another* schema down the
search_path, "whose owner could then make the spend guard RETURN NEW". One step to the
side, a ledger whose own triggers already run such a function (created before that fix:
``create`` kept any function ``to_regprocedure`` found, or re-bound by hand) passed every
check: the trigger check compared the function's name and body, never its schema, so
writers opened it, ``verify`` was clean and ``migrate`` had "nothing to do". The other
schema's owner can swap in ``RETURN NEW`` at will. It is now reported as a changed
trigger (writers refuse; drop it and ``migrate`` re-creates dpledger's own).
"""

from __future__ import annotations

import uuid

import pytest
from _stores import CONTRACT, StoreUnderTest

from dpledger import Ledger, ReleaseRequest
from dpledger.errors import LedgerCorrupted
from dpledger.ledger.migrate import migrate
from dpledger.ledger.pgsql import SPEND_GUARD

LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)


@pytest.mark.parametrize("store", ["postgres"], indirect=True)
def test_an_own_trigger_bound_to_another_schemas_function_is_refused(
    store: StoreUnderTest,
) -> None:
    with store.open() as ledger:
        ledger.release(LOSS, 30.0)
    other = f"o_{uuid.uuid4().hex[:12]}"
    body = SPEND_GUARD.split("$fn$")[1]
    store.raw(f'CREATE SCHEMA "{other}"')
    try:
        store.raw(
            f'CREATE FUNCTION "{other}".dpl_spend_never_decreases() RETURNS trigger '
            f"LANGUAGE plpgsql AS $fn${body}$fn$"
        )
        store.raw("DROP TRIGGER dpl_spend_no_decrease ON dpl_spend")
        store.raw(
            "CREATE TRIGGER dpl_spend_no_decrease BEFORE UPDATE OR DELETE ON dpl_spend "
            f'FOR EACH ROW EXECUTE FUNCTION "{other}".dpl_spend_never_decreases()'
        )
        with pytest.raises(LedgerCorrupted, match="dpl_spend_no_decrease"):  # was: opened
            Ledger.open(store.target, CONTRACT, mode="write").close()
        with Ledger.open(store.target, CONTRACT, mode="read") as reader:
            assert any("dpl_spend_no_decrease" in p for p in reader.verify().problems)
        store.raw("DROP TRIGGER dpl_spend_no_decrease ON dpl_spend")  # as the refusal says
        assert migrate(store.target).restored == ("dpl_spend_no_decrease",)
        with Ledger.open(store.target, CONTRACT, mode="write") as writer:
            writer.release(LOSS, 30.0)
            assert writer.verify().ok
    finally:
        store.raw(f'DROP SCHEMA "{other}" CASCADE')
