"""Review 42 (the dropped-trigger diff): ``dpledger ledger migrate`` said it re-created
or upgraded a ledger's triggers, and writers were refused right after.

1. PostgreSQL: a guard function left behind with another body (``CREATE OR REPLACE
   FUNCTION dpl_spend_never_decreases() … RETURN NEW``, the triggers dropped — or the
   triggers dropped as the refusal of a changed function advises, "drop them") was kept
   by the repair: ``IF to_regprocedure(…) IS NULL THEN CREATE FUNCTION``. The re-created
   triggers ran the foreign body, so every writer refused them ("changed") right after
   migrate said "writers open it again", and following that refusal's advice (drop them,
   migrate) looped: migrate re-created them on the same body again.
2. Both stores: a schema-3 ledger lacking one of the entries' append-only triggers was
   taken to schema 4 with only the spend guard added; migrate said "migrated … from
   schema 3 to 4" and every writer then refused the ledger (a trigger missing), until a
   second migrate. The last step now creates every own trigger missing (as SQLite's step
   to schema 3 always re-created the entries' ones) and names them in ``restored``.
"""

from __future__ import annotations

import json
import re

import pytest
from _stores import CONTRACT, StoreUnderTest

from dpledger import Ledger, ReleaseRequest
from dpledger.cli.main import main
from dpledger.ledger.guards import GUARDS_MISSING
from dpledger.ledger.migrate import migrate

LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)
NO_OP = (
    "CREATE OR REPLACE FUNCTION dpl_spend_never_decreases() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$"
)


@pytest.mark.parametrize("store", ["postgres"], indirect=True)
def test_the_repair_re_creates_a_guard_function_left_with_another_body(
    store: StoreUnderTest,
) -> None:
    with store.open() as ledger:
        ledger.release(LOSS, 30.0)
    store.raw("DROP TRIGGER dpl_spend_no_decrease ON dpl_spend")
    store.raw("DROP TRIGGER dpl_spend_no_truncate ON dpl_spend")
    store.raw(NO_OP)  # no trigger runs it: nothing reports it while the triggers are gone
    done = migrate(store.target)
    assert done.restored == ("dpl_spend_no_decrease", "dpl_spend_no_truncate")
    with Ledger.open(store.target, CONTRACT, mode="read") as reader:
        assert reader.verify().problems == ()  # was: the triggers "changed"
    with Ledger.open(store.target, CONTRACT, mode="write") as writer:  # was: refused
        writer.release(LOSS, 30.0)
    with pytest.raises(store.db_error, match="never decrease"):
        store.raw("UPDATE dpl_spend SET total = '0'")


@pytest.mark.parametrize("store", ["postgres"], indirect=True)
def test_the_repair_keeps_an_intact_guard_function(store: StoreUnderTest) -> None:
    """Replacing a function needs its owner: one as dpledger wrote it is left alone."""
    with store.open() as ledger:
        ledger.release(LOSS, 30.0)
    row = "SELECT xmin::text FROM pg_proc WHERE proname = 'dpl_spend_never_decreases'"
    before = store.raw(row)
    store.raw("DROP TRIGGER dpl_spend_no_truncate ON dpl_spend")
    assert migrate(store.target).restored == ("dpl_spend_no_truncate",)
    assert store.raw(row) == before


@pytest.mark.parametrize("store", ["postgres"], indirect=True)
def test_the_3_to_4_step_re_creates_a_guard_function_left_with_another_body(
    store: StoreUnderTest,
) -> None:
    with store.open() as ledger:
        ledger.release(LOSS, 30.0)
    for name in ("dpl_spend_no_decrease", "dpl_spend_no_truncate"):
        store.raw(f"DROP TRIGGER {name} ON dpl_spend")
    store.raw(NO_OP)
    store.raw("UPDATE dpl_meta SET value = '3' WHERE key = 'schema_version'")
    assert migrate(store.target).to_version == "4"
    with Ledger.open(store.target, CONTRACT, mode="write") as writer:  # was: refused
        writer.release(LOSS, 30.0)
        assert writer.verify().ok


def _schema_3_without_an_entries_trigger(store: StoreUnderTest) -> str:
    """A schema-3 ledger (as schema 4 without the spend guard) lacking one of the
    entries' append-only triggers; its name."""
    with store.open() as ledger:
        ledger.release(LOSS, 30.0)
    if store.kind == "sqlite":
        name = "dpl_entries_no_update"
        for dropped in ("dpl_spend_no_decrease", "dpl_spend_no_delete", "dpl_spend_no_replace"):
            store.raw(f"DROP TRIGGER {dropped}")
        store.raw(f"DROP TRIGGER {name}")
    else:
        name = "dpl_entries_no_truncate"
        for dropped in ("dpl_spend_no_decrease", "dpl_spend_no_truncate"):
            store.raw(f"DROP TRIGGER {dropped} ON dpl_spend")
        store.raw(f"DROP TRIGGER {name} ON dpl_entries")
    store.raw("UPDATE dpl_meta SET value = '3' WHERE key = 'schema_version'")
    return name


def test_migrating_schema_3_re_creates_a_missing_entries_trigger(
    store: StoreUnderTest,
) -> None:
    name = _schema_3_without_an_entries_trigger(store)
    done = migrate(store.target)
    assert (done.from_version, done.to_version) == ("3", "4")
    assert done.restored == (name,)
    with Ledger.open(store.target, CONTRACT, mode="write") as writer:  # was: refused
        writer.release(LOSS, 30.0)
        assert writer.verify().ok


def test_the_cli_names_the_triggers_a_schema_3_migration_re_created(
    store: StoreUnderTest, capsys: pytest.CaptureFixture[str]
) -> None:
    name = _schema_3_without_an_entries_trigger(store)
    assert main(["ledger", "migrate", "--ledger", store.target, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["restored_triggers"] == [name]
    with Ledger.open(store.target, CONTRACT, mode="read") as reader:
        assert not any(p.startswith(GUARDS_MISSING) for p in reader.verify().problems)
    assert main(["ledger", "migrate", "--ledger", store.target]) == 0
    assert "nothing to do" in capsys.readouterr().out  # was: the triggers re-created now


def test_the_cli_text_of_a_schema_3_migration_names_them(
    store: StoreUnderTest, capsys: pytest.CaptureFixture[str]
) -> None:
    name = _schema_3_without_an_entries_trigger(store)
    assert main(["ledger", "migrate", "--ledger", store.target]) == 0
    out = capsys.readouterr().out
    assert "from schema 3 to 4" in out
    assert re.search(rf"trigger\(s\) {name} re-created", out)
