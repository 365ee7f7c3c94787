"""A schema-4 ledger whose own triggers were dropped (review 41's strict xfail, fixed).

Dropping dpledger's triggers needs the privilege that disabling them needs (review 40
refuses a disabled or never-firing one) and has the same effect: a spend total lowered
by hand afterwards lets later releases overspend. A writer refuses such a ledger before
it writes anything; ``verify`` names the missing triggers; ``dpledger ledger migrate``
re-creates them once the rest of the ledger verifies, and refuses (nothing changed)
when it does not. Both stores (PostgreSQL real, started by the suite).
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from _stores import CONTRACT, StoreUnderTest
from factories import drop_spend_guard, policy

from dpledger import Ledger, ReleaseRequest
from dpledger.cli.main import main
from dpledger.errors import DpLedgerError, LedgerCorrupted, MigrationRefused
from dpledger.ledger.guards import GUARDS_MISSING
from dpledger.ledger.migrate import migrate

LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)


def _spend_all(store: StoreUnderTest) -> int:
    """Release the loss metric until its allocation refuses; how many were released."""
    with store.open() as ledger:
        released = 0
        while True:
            try:
                ledger.release(LOSS, 30.0)
            except DpLedgerError:
                return released
            released += 1


def _snapshot(store: StoreUnderTest) -> list[object]:
    """Every row a writer could change (entries, spend, meta), for byte-equality."""
    return [
        store.raw(f"SELECT * FROM {t} ORDER BY 1, 2")
        for t in ("dpl_entries", "dpl_spend", "dpl_meta")
    ]


def test_a_writer_refuses_a_schema_4_ledger_whose_guard_was_dropped(
    store: StoreUnderTest,
) -> None:
    assert _spend_all(store) > 0
    store.disable_append_only()  # drops the entries' and the spend's triggers
    store.raw("UPDATE dpl_spend SET total = '0'")  # the tamper schema 4 was made to stop
    before = _snapshot(store)
    with (
        pytest.raises(LedgerCorrupted, match="dpl_spend_no_decrease") as caught,
        Ledger.open(store.target, CONTRACT, mode="write") as writer,
    ):
        writer.release(LOSS, 30.0)  # was: approved past the allocation
    assert "nothing was written" in str(caught.value)
    assert "ledger migrate" in str(caught.value)
    with (  # the dry run decides as the release would
        pytest.raises(LedgerCorrupted, match=re.escape(GUARDS_MISSING)),
        Ledger.open(store.target, CONTRACT, mode="write") as writer,
    ):
        writer.check(LOSS, 30.0)
    assert _snapshot(store) == before
    with Ledger.open(store.target, CONTRACT, mode="read") as reader:  # reads still work
        report = reader.verify()
    assert not report.ok
    assert any(p.startswith(GUARDS_MISSING) for p in report.problems)
    assert any("spend of epoch 0" in p for p in report.problems)  # the lowered total
    with pytest.raises(MigrationRefused, match="does not verify") as refused:
        migrate(store.target)  # the lowered total: no repair, nothing changed
    assert "spend of epoch 0" in str(refused.value)
    assert _snapshot(store) == before
    with pytest.raises(LedgerCorrupted, match=re.escape(GUARDS_MISSING)):  # still refused
        Ledger.open(store.target, CONTRACT, mode="write")  # a writer refuses as it opens


def test_migrate_recreates_dropped_guards_of_a_ledger_that_verifies(
    store: StoreUnderTest,
) -> None:
    released = _spend_all(store)
    store.disable_append_only()
    with Ledger.open(store.target, CONTRACT, mode="read") as reader:
        problems = reader.verify().problems
    assert len(problems) == 1, problems
    assert problems[0].startswith(GUARDS_MISSING)
    done = migrate(store.target)
    assert done.changed
    assert done.from_version == done.to_version == "4"
    assert set(done.restored) >= {"dpl_spend_no_decrease"}
    assert done.entries == released
    with Ledger.open(store.target, CONTRACT, mode="read") as reader:
        assert reader.verify().ok
    with pytest.raises(store.db_error):  # the guard fires again
        store.raw("UPDATE dpl_spend SET total = '0'")
    with (
        Ledger.open(store.target, CONTRACT, mode="write") as writer,
        pytest.raises(DpLedgerError, match=r"allocation|budget"),  # spent: refused
    ):
        writer.release(LOSS, 30.0)
    again = migrate(store.target)  # nothing left to do
    assert not again.changed
    assert again.restored == ()


def test_one_dropped_entries_trigger_refuses_a_writer(store: StoreUnderTest) -> None:
    with store.open() as ledger:
        ledger.release(LOSS, 30.0)
    name = "dpl_entries_no_update" if store.kind == "sqlite" else "dpl_entries_no_truncate"
    store.raw(f"DROP TRIGGER {name}" + ("" if store.kind == "sqlite" else " ON dpl_entries"))
    with (
        pytest.raises(LedgerCorrupted, match=name),
        Ledger.open(store.target, CONTRACT, mode="write") as writer,
    ):
        writer.release(LOSS, 30.0)
    assert migrate(store.target).restored == (name,)
    with Ledger.open(store.target, CONTRACT, mode="write") as writer:
        assert writer.release(LOSS, 30.0).value is not None


def test_the_cli_repairs_and_says_what_it_re_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path, policy(), mode="create") as ledger:
        ledger.init()
    conn = sqlite3.connect(path)
    drop_spend_guard(conn)
    conn.commit()
    conn.close()
    assert main(["ledger", "migrate", "--ledger", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["changed"] is True
    assert sorted(out["restored_triggers"]) == [
        "dpl_spend_no_decrease",
        "dpl_spend_no_delete",
        "dpl_spend_no_replace",
    ]
    assert main(["ledger", "migrate", "--ledger", str(path)]) == 0
    assert "nothing to do" in capsys.readouterr().out


@pytest.mark.parametrize("store", ["postgres"], indirect=True)  # SQLite's call no function
def test_a_guard_function_dropped_with_its_triggers_is_restored(store: StoreUnderTest) -> None:
    with store.open() as ledger:
        ledger.release(LOSS, 30.0)
    store.raw("DROP FUNCTION dpl_spend_never_decreases() CASCADE")  # both spend triggers
    with pytest.raises(LedgerCorrupted, match="dpl_spend_no_decrease, dpl_spend_no_truncate"):
        Ledger.open(store.target, CONTRACT, mode="write")
    assert migrate(store.target).restored == ("dpl_spend_no_decrease", "dpl_spend_no_truncate")
    with pytest.raises(store.db_error):
        store.raw("DELETE FROM dpl_spend")
    with Ledger.open(store.target, CONTRACT, mode="read") as reader:
        assert reader.verify().ok


def test_the_missing_guards_statements_name_every_own_trigger() -> None:
    from dpledger.ledger import pgsql, sqlite_sql

    for name in pgsql.OWN_TRIGGERS:
        assert f"'{name}'" in pgsql.SQL.missing_guards
    assert pgsql.SQL.missing_guards.count("_no_") == len(pgsql.OWN_TRIGGERS)
    names = [ddl.split()[5] for ddl in sqlite_sql.GUARDS]
    assert len(names) == 5
    for name in names:
        assert f"('{name}')" in sqlite_sql.SQL.missing_guards
