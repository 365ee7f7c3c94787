"""The stores every contract test runs against: a SQLite file and a real PostgreSQL schema.

:class:`StoreUnderTest` pairs a ledger target with raw database access (what an attacker
with database access, or a fault, does); the ``store`` fixture in ``conftest.py`` yields
one per store. ``CONTRACT`` is the small policy most contract tests release under.
"""

from __future__ import annotations

import contextlib
import socket
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dpledger.ledger import Ledger
from dpledger.policy import Policy

__all__ = ["CONTRACT", "CONTRACT_POLICY", "StoreUnderTest", "closed_port"]

CONTRACT_POLICY = """
name = "contract"
version = "1"
neighbouring = "replace"
definition = "pure"
epoch_epsilon = "4"
eval_fraction = "0.25"        # ε_eval = 1 per client per epoch
allocation = "pooled"         # the budget tests release one metric many times per epoch

[regions]
names = ["a", "b"]

[metrics.loss]
kind = "scalar_mean"
epsilon = "0.1"
clip = { low = "0", high = "1", source = "contract test" }
target = 0.5                  # ci95 half-width 10·ln20/n ≤ 0.5 needs n ≥ 60

[metrics.big]
kind = "scalar_mean"
epsilon = "0.95"
clip = { low = "0", high = "1", source = "contract test" }

[metrics.hist5]
kind = "histogram"
edges = [1.0, 2.0, 3.0, 4.0]
edges_version = "h5/v1"
cap_per_client = "1"
epsilon = "0.1"

[metrics.hist20]
kind = "histogram"
edges = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0,
         11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0]
edges_version = "h20/v1"
cap_per_client = "1"
epsilon = "0.1"
"""

CONTRACT = Policy.from_toml(CONTRACT_POLICY)


@dataclass
class StoreUnderTest:
    """One store's ledger target, plus raw database access for the tamper tests."""

    kind: str
    target: str  # a path or URL a child process can open too
    unreachable: str  # a target that must fail to open
    db_error: type[BaseException]
    fresh_target: Callable[[], str]  # another new, empty ledger location
    _opened: list[Ledger] = field(default_factory=list)

    def open(self, policy: Policy = CONTRACT) -> Ledger:
        ledger = Ledger.open(self.target, policy, mode="create")
        self._opened.append(ledger)
        return ledger

    def raw(self, sql: str, params: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
        """Run one statement on a separate autocommit connection, as someone with DB access."""
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.target, isolation_level=None)
            try:
                return conn.execute(sql, params or ()).fetchall()
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(self.target, autocommit=True) as pg:
            cur = pg.execute(sql.replace("?", "%s") if params else sql, params)
            return cur.fetchall() if cur.description else []

    def disable_append_only(self) -> None:
        """What an attacker with database access does first: drop the append-only
        triggers on entries and the guard on spend totals."""
        if self.kind == "sqlite":
            names = self.raw(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' "
                "AND tbl_name IN ('dpl_entries', 'dpl_spend')"
            )
            assert len(names) == 5, f"the SQLite store's triggers are {names}"
            for (name,) in names:
                self.raw(f"DROP TRIGGER {name}")
        else:  # dropped, as on SQLite: a disabled guard fails verify (review 40)
            for table, name in (("dpl_entries", "dpl_entries_no_change"),
                                ("dpl_entries", "dpl_entries_no_truncate"),
                                ("dpl_spend", "dpl_spend_no_decrease"),
                                ("dpl_spend", "dpl_spend_no_truncate")):  # fmt: skip
                self.raw(f"DROP TRIGGER {name} ON {table}")

    def restore_guards(self) -> None:
        """Re-create dpledger's own triggers after a tamper (a writer refuses a schema-4
        ledger without them): the test goes on to what it checks about the rows."""
        if self.kind == "sqlite":
            from dpledger.ledger.sqlite_sql import GUARDS

            for ddl in GUARDS:
                self.raw(ddl)
        else:
            from dpledger.ledger.pgsql import APPEND_ONLY, SPEND_GUARD

            self.raw(APPEND_ONLY)
            self.raw(SPEND_GUARD)

    @contextlib.contextmanager
    def tampering(self) -> Iterator[None]:
        """The triggers dropped for the block's raw edits, then restored."""
        self.disable_append_only()
        try:
            yield
        finally:
            self.restore_guards()

    def fail_inserts(self, on: bool) -> None:
        """Make every INSERT into dpl_entries fail (a database fault mid-release), or stop."""
        if self.kind == "sqlite":
            self.raw(
                "CREATE TRIGGER t_fail BEFORE INSERT ON dpl_entries "
                "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
                if on
                else "DROP TRIGGER t_fail"
            )
        elif on:
            self.raw(
                "CREATE FUNCTION t_fail() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'injected failure'; END $$"
            )
            self.raw(
                "CREATE TRIGGER t_fail BEFORE INSERT ON dpl_entries "
                "FOR EACH ROW EXECUTE FUNCTION t_fail()"
            )
        else:
            self.raw("DROP TRIGGER t_fail ON dpl_entries")

    def close_all(self) -> None:
        for ledger in self._opened:
            ledger.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server_gone(ledger: Ledger, pg_url: str) -> Iterator[None]:
    """``ledger``'s PostgreSQL server gone: its session killed, a new one pointed at a
    closed port; the server is back on exit."""
    import psycopg

    store: Any = ledger._store
    real = store._url
    host = pg_url.split("@", 1)[1].split("/", 1)[0]
    store._url = real.replace(host, f"127.0.0.1:{closed_port()}", 1)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 60000)", (store._conn.info.backend_pid,))
    try:
        yield
    finally:
        store._url = real


ONE_REGION_HEAD = """
name = "{name}"
version = "1"
neighbouring = "{nb}"
definition = "pure"
epoch_epsilon = "400"
eval_fraction = "0.25"
allocation = "pooled"
[regions]
names = ["a"]
"""
"""A pooled one-region policy's header (region "a", ε_eval = 100): ``.format(name=…, nb=…)``
and append metrics."""

SMALL_HEAD = """
name = "{name}"
version = "1"
neighbouring = "replace"
definition = "pure"
epoch_epsilon = "4"
eval_fraction = "0.25"
[regions]
names = ["a"]
"""
"""A one-region policy's header (region "a", replace, ε_eval = 1, the default allocation):
``.format(name=…)`` and append metrics."""
