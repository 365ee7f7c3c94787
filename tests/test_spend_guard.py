"""The database refuses to lower, move or delete a spend total (schema 4), on both stores.

A writer trusts the spend totals it reads, so a hand-lowered total (``UPDATE dpl_spend SET
total = …``) let later releases overspend until ``verify`` reported it. The guard is a
trigger: the tamper now fails at the UPDATE. Totals are exact fractions as text, compared
exactly (``"10/11"`` is above ``"9/10"``, which a text comparison gets wrong).
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

import pytest
from _stores import CONTRACT, StoreUnderTest

from dpledger import Ledger, Policy
from dpledger.approval import ReleaseRequest
from dpledger.ledger.migrate import migrate
from dpledger.ledger.sqlite_sql import guard_spend
from dpledger.types import Budget, fraction_text

LOSS = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=100)
LONG_EDGES = Path(__file__).parent / "data" / "ledger-long-edges.db"  # schema 3


def _two(store: StoreUnderTest) -> Ledger:
    ledger = store.open()
    ledger.release(LOSS, 30.0)
    ledger.release(LOSS, 30.0)
    assert ledger.verify().ok
    return ledger


def test_lowering_moving_or_deleting_a_spend_total_fails_in_the_database(
    store: StoreUnderTest,
) -> None:
    ledger = _two(store)
    spent = ledger.spent(0, "a")
    tampers = [
        "UPDATE dpl_spend SET total = '1/10'",
        "UPDATE dpl_spend SET total = '0'",
        "UPDATE dpl_spend SET scope = 'b'",
        "DELETE FROM dpl_spend",
    ]
    tampers += (
        ["TRUNCATE dpl_spend"]
        if store.kind == "postgres"
        else ["INSERT OR REPLACE INTO dpl_spend VALUES (0, 'a', 'loss', '1/10')"]
    )
    for sql in tampers:
        with pytest.raises(store.db_error, match=r"dpl(edger)?[ _]spend"):
            store.raw(sql)
    assert ledger.spent(0, "a") == spent
    ledger.release(LOSS, 30.0)  # releases still add to the total
    assert ledger.spent(0, "a").amount == spent.amount * 3 / 2
    assert ledger.verify().ok


@contextmanager
def _writer(store: StoreUnderTest) -> Iterator[Callable[..., object]]:
    """Run UPDATEs as a connection the guard compares for (SQLite: dpledger registers the
    comparison on every connection it writes through; any other cannot write at all)."""
    if store.kind == "postgres":
        yield store.raw
        return
    conn = sqlite3.connect(store.target, isolation_level=None)
    guard_spend(conn)
    try:
        yield lambda sql, params=(): conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def test_the_guard_compares_totals_as_exact_fractions(store: StoreUnderTest) -> None:
    _two(store)  # the total is 1/5
    tiny = Fraction(1, 2**300)
    up = [Fraction(9, 10), Fraction(10, 11), Fraction(10, 11) + tiny]  # "10/11" < "9/10" as text
    down = [Fraction(9, 10), Fraction(10, 11), Fraction(10, 11) + tiny / 2]
    with _writer(store) as run:
        for q in up:
            run("UPDATE dpl_spend SET total = ?", (fraction_text(q),))
        for q in down:
            with pytest.raises(store.db_error, match="never decrease"):
                run("UPDATE dpl_spend SET total = ?", (fraction_text(q),))
        for text in ("-1", "1e999", "1.5", "02/2"):  # not a total as dpledger writes one
            with pytest.raises(store.db_error, match="never decrease"):
                run("UPDATE dpl_spend SET total = ?", (text,))
    assert store.raw("SELECT total FROM dpl_spend") == [(fraction_text(up[-1]),)]


def test_a_sqlite_connection_other_than_dpledgers_cannot_write_spend(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path, CONTRACT, mode="create") as ledger:
        ledger.release(LOSS, 30.0)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        with pytest.raises(sqlite3.OperationalError, match="no such function: dpl_spend_lowered"):
            conn.execute("UPDATE dpl_spend SET total = '1/10'")
    finally:
        conn.close()


def test_migrating_a_schema_3_ledger_adds_the_guard(tmp_path: Path) -> None:
    path = tmp_path / "l3.db"
    shutil.copyfile(LONG_EDGES, path)
    done = migrate(path)
    assert (done.from_version, done.to_version, done.changed) == ("3", "4", True)
    conn = sqlite3.connect(path, isolation_level=None)
    guard_spend(conn)
    try:
        (total,) = conn.execute("SELECT total FROM dpl_spend LIMIT 1").fetchone()
        with pytest.raises(sqlite3.IntegrityError, match="never decrease"):
            conn.execute("UPDATE dpl_spend SET total = '0'")
        with pytest.raises(sqlite3.IntegrityError, match="never deleted"):
            conn.execute("DELETE FROM dpl_spend")
    finally:
        conn.close()
    assert total != "0"
    assert not migrate(path).changed


def _long_edges_policy() -> Policy:
    """The fixture's policy as a new version (its 200-character edges version is refused
    in new policies), as ``test_policy`` opens it."""
    text = (Path(__file__).parent / "data" / "make_ledger_long_edges.py").read_text()
    body = text.split('TEXT = """', 1)[1].split('"""', 1)[0]
    return Policy.from_toml(body.replace('version = "1"', 'version = "2"').replace("EDGES", "v2"))


def test_a_schema_3_ledger_is_written_as_it_is_until_migrated(tmp_path: Path) -> None:
    path = tmp_path / "l3.db"
    shutil.copyfile(LONG_EDGES, path)
    with Ledger.open(path, _long_edges_policy(), mode="write") as ledger:
        ledger.release(ReleaseRequest(epoch=1, metric="loss", region="north", cohort=100), 50.0)
        assert ledger.spent(1, "north") == Budget(Fraction(1, 10), "epsilon")
    conn = sqlite3.connect(path)
    try:
        meta = "SELECT value FROM dpl_meta WHERE key = 'schema_version'"
        assert conn.execute(meta).fetchone() == ("3",)
        guards = "SELECT name FROM sqlite_master WHERE name LIKE 'dpl_spend_%'"
        assert conn.execute(guards).fetchall() == []  # writing never migrates
        conn.execute("UPDATE dpl_spend SET total = '0'")  # unguarded until migrated
    finally:
        conn.close()
