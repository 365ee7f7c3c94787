"""Review 42, diff 2: a PostgreSQL ledger created in a schema that still holds a guard
function of dpledger's name with another body (left by a dropped ledger and edited, or
planted) got its triggers on that body: ``create`` ran the plain guard DDL, which keeps
an existing function (``IF to_regprocedure(…) IS NULL``). The creator, which checked the
triggers as it connected (there were none), then released through a spend guard that
guarded nothing (``RETURN NEW``: a lowered total was taken), and every later writer
refused the new ledger ("trigger(s) … that dpledger did not create"). The diff gave
``migrate`` the DDL that replaces a function with another body (``pgsql.RESTORE``);
``create`` now runs it too.
"""

from __future__ import annotations

import pytest
from _stores import CONTRACT, StoreUnderTest

from dpledger import Ledger, ReleaseRequest

LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)


@pytest.mark.parametrize("store", ["postgres"], indirect=True)
def test_a_new_ledger_never_runs_a_guard_function_left_with_another_body(
    store: StoreUnderTest,
) -> None:
    store.raw(
        "CREATE FUNCTION dpl_spend_never_decreases() RETURNS trigger "
        "LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$"
    )
    with Ledger.open(store.target, CONTRACT, mode="create") as creator:
        creator.release(LOSS, 30.0)
    with pytest.raises(store.db_error, match="never decrease"):  # was: taken
        store.raw("UPDATE dpl_spend SET total = '0'")
    with Ledger.open(store.target, CONTRACT, mode="write") as writer:  # was: refused
        writer.release(LOSS, 30.0)
        assert writer.verify().ok
