"""The store interface and the SQL both stores share: schema, chain, spend, reads.

A store persists hash-chained entries and a per-scope spend table that is updated in
the same transaction as the entry it totals. Subclasses provide the connection, the
placeholder style and the write lock (SQLite ``BEGIN IMMEDIATE``, PostgreSQL an
advisory transaction lock).
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from dpledger.errors import LedgerCorrupted
from dpledger.ledger.records import GENESIS, Entry, EntryDraft, chain_hash
from dpledger.mechanisms import MechanismFacts
from dpledger.policy import fraction_text

__all__ = ["SCHEMA_VERSION", "SqlStore", "WriteTxn"]

SCHEMA_VERSION = "1"

_COLUMNS = (
    "seq, created_at, epoch, scope, metric, policy_name, policy_version, policy_hash, "
    "edges_version, mechanism, unit, charge, cohort, output, prev_hash, hash"
)

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS dpl_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS dpl_entries (
        seq BIGINT PRIMARY KEY,
        created_at TEXT NOT NULL,
        epoch BIGINT NOT NULL,
        scope TEXT NOT NULL,
        metric TEXT NOT NULL,
        policy_name TEXT NOT NULL,
        policy_version TEXT NOT NULL,
        policy_hash TEXT NOT NULL,
        edges_version TEXT,
        mechanism TEXT NOT NULL,
        unit TEXT NOT NULL,
        charge TEXT NOT NULL,
        cohort BIGINT NOT NULL,
        output TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE
    )""",
    """CREATE TABLE IF NOT EXISTS dpl_spend (
        epoch BIGINT NOT NULL,
        scope TEXT NOT NULL,
        total TEXT NOT NULL,
        PRIMARY KEY (epoch, scope)
    )""",
    "CREATE INDEX IF NOT EXISTS dpl_entries_epoch ON dpl_entries (epoch, scope)",
    """CREATE TABLE IF NOT EXISTS dpl_policies (
        hash TEXT PRIMARY KEY,
        version TEXT NOT NULL,
        body TEXT NOT NULL
    )""",
)


def _row_to_entry(row: Sequence[Any]) -> Entry:
    (seq, created, epoch, scope, metric, pname, pver, phash, edges, mech, unit, charge,
     cohort, output, prev, h) = row  # fmt: skip
    try:
        facts = MechanismFacts.from_dict(json.loads(mech))
        out = tuple(float(x) for x in json.loads(output))
        draft = EntryDraft(
            int(epoch), str(scope), str(metric), str(pname), str(pver), str(phash),
            None if edges is None else str(edges), facts, str(unit), Fraction(charge),
            int(cohort), out,
        )  # fmt: skip
    except (ValueError, TypeError, ZeroDivisionError) as e:
        raise LedgerCorrupted(f"entry {seq} cannot be read: {e}") from e
    return Entry(int(seq), str(created), draft, str(prev), str(h))


class WriteTxn:
    """A write transaction holding the ledger's write lock (see :meth:`SqlStore.write`)."""

    def __init__(self, store: SqlStore) -> None:
        self._s = store
        self._spent: dict[int, dict[str, Fraction]] = {}

    def spent(self, epoch: int) -> dict[str, Fraction]:
        """Exact spend per scope in ``epoch``, read under the write lock (a copy)."""
        if epoch not in self._spent:
            self._spent[epoch] = self._s._read_spent(epoch)
        return dict(self._spent[epoch])

    def epoch_policy(self, epoch: int) -> tuple[str, str] | None:
        """``(policy hash, version)`` the epoch was opened under, read under the lock."""
        return self._s._epoch_policy(epoch)

    def append(self, drafts: Sequence[EntryDraft]) -> list[Entry]:
        """Chain, insert and total ``drafts``; visible to others only after commit."""
        s = self._s
        rows = s._fetchall("SELECT key, value FROM dpl_meta WHERE key IN ('head_seq', 'head_hash')")
        head = dict(rows)
        head_seq, head_hash = int(head.get("head_seq", 0)), str(head.get("head_hash", GENESIS))
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        out: list[Entry] = []
        touched: set[tuple[int, str]] = set()
        for d in drafts:
            seq = head_seq + 1
            h = chain_hash(seq, now, d, head_hash)
            s._execute(
                f"INSERT INTO dpl_entries ({_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (seq, now, d.epoch, d.scope, d.metric, d.policy_name, d.policy_version,
                 d.policy_hash, d.edges_version, json.dumps(d.facts.as_dict()), d.unit,
                 fraction_text(d.charge), d.cohort, json.dumps(list(d.output)), head_hash, h),
            )  # fmt: skip
            self.spent(d.epoch)  # make sure the epoch's totals are loaded
            totals = self._spent[d.epoch]
            totals[d.scope] = totals.get(d.scope, Fraction(0)) + d.charge
            touched.add((d.epoch, d.scope))
            out.append(Entry(seq, now, d, head_hash, h))
            head_seq, head_hash = seq, h
        for epoch, scope in sorted(touched):
            s._upsert_spend(epoch, scope, fraction_text(self._spent[epoch][scope]))
        s._set_meta(("head_seq", str(head_seq)), ("head_hash", head_hash))
        return out


class SqlStore(ABC):
    """Shared SQL for the ledger's stores; subclasses supply connection and locking."""

    placeholder = "?"

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._bound: dict[int, tuple[str, str]] = {}  # epoch -> (policy hash, version)

    # -- what a backend provides ------------------------------------------------------

    @abstractmethod
    def _raw_execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement in the current transaction (or autocommit); return rows."""

    @abstractmethod
    @contextmanager
    def _write_transaction(self) -> Iterator[None]:
        """Begin a transaction holding the ledger-wide write lock; commit or roll back."""

    @abstractmethod
    @contextmanager
    def _read_transaction(self) -> Iterator[None]:
        """Begin a read-only transaction: every read inside sees one committed state."""

    def _upsert_spend(self, epoch: int, scope: str, total: str) -> None:
        """Set the spend total of one scope."""
        self._execute(
            "INSERT INTO dpl_spend (epoch, scope, total) VALUES (?, ?, ?) "
            "ON CONFLICT (epoch, scope) DO UPDATE SET total = excluded.total",
            (epoch, scope, total),
        )

    def _set_meta(self, *pairs: tuple[str, str]) -> None:
        """Set meta values, in one statement."""
        rows = ", ".join("(?, ?)" for _ in pairs)
        self._execute(
            f"INSERT INTO dpl_meta (key, value) VALUES {rows} "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [x for pair in pairs for x in pair],
        )

    @abstractmethod
    def close(self) -> None:
        """Release the connection."""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the ledger lives (path or URL without password)."""

    # -- shared SQL -------------------------------------------------------------------

    def _sql(self, sql: str) -> str:
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._raw_execute(self._sql(sql), params)

    def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._raw_execute(self._sql(sql), params)

    def _epoch_policy(self, epoch: int) -> tuple[str, str] | None:
        # an epoch's first entry never changes (append-only), so a binding once seen is kept
        if epoch in self._bound:
            return self._bound[epoch]
        rows = self._fetchall(
            "SELECT policy_hash, policy_version FROM dpl_entries WHERE epoch = ? "
            "ORDER BY seq LIMIT 1",
            (epoch,),
        )
        if not rows:
            return None
        self._bound[epoch] = (str(rows[0][0]), str(rows[0][1]))
        return self._bound[epoch]

    def epoch_policy(self, epoch: int) -> tuple[str, str] | None:
        """``(policy hash, version)`` of the epoch's first entry, or None if it is unopened.

        An epoch is bound to the policy it was opened under: its budget and regions.
        """
        with self._lock:
            return self._epoch_policy(epoch)

    def policy_body(self, policy_hash: str) -> str | None:
        """The recorded JSON of a policy the ledger has been opened with."""
        with self._lock:
            rows = self._fetchall("SELECT body FROM dpl_policies WHERE hash = ?", (policy_hash,))
        return str(rows[0][0]) if rows else None

    def _read_spent(self, epoch: int) -> dict[str, Fraction]:
        rows = self._fetchall("SELECT scope, total FROM dpl_spend WHERE epoch = ?", (epoch,))
        return {str(scope): Fraction(total) for scope, total in rows}

    def init_schema(self, binding: dict[str, str], policy: tuple[str, str, str]) -> None:
        """Create the schema if missing, bind it to a policy name and unit, record the policy.

        Opening a ledger with a policy of another name or budget unit raises
        :class:`LedgerCorrupted` (and records nothing): its spend would be read against
        the wrong budget. ``policy`` is ``(hash, version, JSON body)``, kept so that
        ``verify`` can check each epoch against the policy it was opened under.
        """
        with self._write_transaction():
            for stmt in SCHEMA:
                self._execute(stmt)
            meta = dict(self._fetchall("SELECT key, value FROM dpl_meta"))
            if not meta:
                self._set_meta(("schema_version", SCHEMA_VERSION), *binding.items())
            self._check_binding(meta, binding)
            if not self._fetchall("SELECT 1 FROM dpl_policies WHERE hash = ?", (policy[0],)):
                self._execute(
                    "INSERT INTO dpl_policies (hash, version, body) VALUES (?, ?, ?)", policy
                )

    def _check_binding(self, meta: dict[str, str], binding: dict[str, str]) -> None:
        if not meta:
            return
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise LedgerCorrupted(
                f"{self.location}: schema version {meta.get('schema_version')!r}, this "
                f"dpledger reads {SCHEMA_VERSION!r}; upgrade dpledger or migrate the ledger"
            )
        for k, v in binding.items():
            if meta.get(k) != v:
                raise LedgerCorrupted(
                    f"{self.location}: this ledger belongs to {k}={meta.get(k)!r}, not {v!r}; "
                    "open it with its own policy, or start a new ledger"
                )

    @contextmanager
    def write(self) -> Iterator[WriteTxn]:
        """A transaction under the ledger-wide write lock; commits on normal exit."""
        with self._lock, self._write_transaction():
            yield WriteTxn(self)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside see one committed state, whatever other writers commit meanwhile."""
        with self._lock, self._read_transaction():
            yield

    def spent(self, epoch: int) -> dict[str, Fraction]:
        """Exact committed spend per scope in ``epoch`` (a consistent snapshot)."""
        with self._lock:
            return self._read_spent(epoch)

    def all_spent(self) -> dict[tuple[int, str], Fraction]:
        """Exact committed spend of every (epoch, scope)."""
        with self._lock:
            rows = self._fetchall("SELECT epoch, scope, total FROM dpl_spend")
        return {(int(e), str(s)): Fraction(t) for e, s, t in rows}

    def meta(self) -> dict[str, str]:
        """The meta table (schema version, policy binding, chain head)."""
        with self._lock:
            return {str(k): str(v) for k, v in self._fetchall("SELECT key, value FROM dpl_meta")}

    def entries(
        self,
        *,
        epoch: int | None = None,
        scope: str | None = None,
        metric: str | None = None,
        after: int = 0,
        limit: int | None = None,
    ) -> list[Entry]:
        """Committed entries in chain order, optionally filtered."""
        where, params = ["seq > ?"], list[object]([after])
        for col, val in (("epoch", epoch), ("scope", scope), ("metric", metric)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        sql = f"SELECT {_COLUMNS} FROM dpl_entries WHERE {' AND '.join(where)} ORDER BY seq"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._lock:
            rows = self._fetchall(sql, params)
        return [_row_to_entry(r) for r in rows]

    def count(self) -> int:
        """Number of committed entries."""
        with self._lock:
            return int(self._fetchall("SELECT COUNT(*) FROM dpl_entries")[0][0])
