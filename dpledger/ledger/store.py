"""The store interface and the SQL both stores share: schema, chain, spend, reads.

A store persists hash-chained entries and a per-(scope, metric) spend table that is
updated in the same transaction as the entry it totals. Subclasses provide the
connection, the placeholder style, the write lock (SQLite ``BEGIN IMMEDIATE``,
PostgreSQL an advisory transaction lock) and how a new ledger comes into existence.

Opening never creates: a store opened on a missing ledger either refuses
(:class:`~dpledger.errors.LedgerNotFound`, modes ``read`` and ``write``) or stays
*pending* (mode ``create``) until :meth:`SqlStore.create` runs, which the ledger calls
only for an approved release or an explicit ``init``.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Literal

from dpledger.accounting import EpochSpend
from dpledger.errors import LedgerCorrupted, LedgerNotFound, PolicyMismatch, StoreError
from dpledger.ledger.records import GENESIS, Entry, EntryDraft, chain_hash
from dpledger.mechanisms import MechanismFacts
from dpledger.policy import fraction_text

__all__ = ["SCHEMA", "SCHEMA_VERSION", "Mode", "SqlStore", "WriteTxn", "row_to_entry"]

SCHEMA_VERSION = "2"
Mode = Literal["read", "write", "create"]
"""How a ledger is opened: ``read`` (existing, never written), ``write`` (existing),
``create`` (created by the first approved release or an explicit ``init``)."""

COLUMNS = (
    "seq, created_at, epoch, scope, metric, policy_name, policy_version, policy_hash, "
    "edges_version, mechanism, unit, charge, cohort, output, release_id, request_hash, "
    "prev_hash, hash"
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
        release_id TEXT UNIQUE,
        request_hash TEXT,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE
    )""",
    """CREATE TABLE IF NOT EXISTS dpl_spend (
        epoch BIGINT NOT NULL,
        scope TEXT NOT NULL,
        metric TEXT NOT NULL,
        total TEXT NOT NULL,
        PRIMARY KEY (epoch, scope, metric)
    )""",
    "CREATE INDEX IF NOT EXISTS dpl_entries_epoch ON dpl_entries (epoch, scope)",
    """CREATE TABLE IF NOT EXISTS dpl_policies (
        hash TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        version TEXT NOT NULL,
        body TEXT NOT NULL
    )""",
)


def row_to_entry(row: Sequence[Any]) -> Entry:
    """An :class:`Entry` from a row of :data:`COLUMNS`; :class:`LedgerCorrupted` if unreadable."""
    (seq, created, epoch, scope, metric, pname, pver, phash, edges, mech, unit, charge,
     cohort, output, release_id, request_hash, prev, h) = row  # fmt: skip
    try:
        facts = MechanismFacts.from_dict(json.loads(mech))
        out = tuple(float(x) for x in json.loads(output))
        draft = EntryDraft(
            _int(epoch), _text(scope), _text(metric), _text(pname), _text(pver), _text(phash),
            None if edges is None else _text(edges), facts, _text(unit), Fraction(charge),
            _int(cohort), out, None if release_id is None else _text(release_id),
            None if request_hash is None else _text(request_hash),
        )  # fmt: skip
        return Entry(_int(seq), _text(created), draft, _text(prev), _text(h))
    except (ValueError, TypeError, ZeroDivisionError, AttributeError, RecursionError) as e:
        raise LedgerCorrupted(f"entry {seq!r} cannot be read: {type(e).__name__}: {e}") from e


def _int(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {v!r}")
    return v


def _text(v: object) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected text, got {v!r}")
    return v


class WriteTxn:
    """A write transaction holding the ledger's write lock (see :meth:`SqlStore.write`)."""

    def __init__(self, store: SqlStore) -> None:
        self._s = store
        self._spend: dict[int, dict[tuple[str, str], Fraction]] = {}

    def spend(self, epoch: int) -> EpochSpend:
        """The epoch's exact spend per (scope, metric), read under the write lock."""
        if epoch not in self._spend:
            self._spend[epoch] = self._s._read_spend(epoch)
        return EpochSpend(dict(self._spend[epoch]))

    def epoch_policy(self, epoch: int) -> tuple[str, str] | None:
        """``(policy hash, version)`` the epoch was opened under, read under the lock."""
        return self._s._epoch_policy(epoch)

    def find_release(self, release_id: str) -> Entry | None:
        """The committed entry recorded under ``release_id`` (an indexed read), if any."""
        return self._s._find_release(release_id)

    def record_policy(self, policy_hash: str, name: str, version: str, body: str) -> None:
        """Record a policy body once, refusing a second content for one version."""
        self._s._record_policy(policy_hash, name, version, body)

    def append(self, drafts: Sequence[EntryDraft]) -> list[Entry]:
        """Chain, insert and total ``drafts``; visible to others only after commit."""
        s = self._s
        rows = s._fetchall("SELECT key, value FROM dpl_meta WHERE key IN ('head_seq', 'head_hash')")
        head = dict(rows)
        head_seq, head_hash = int(head.get("head_seq", 0)), str(head.get("head_hash", GENESIS))
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        out: list[Entry] = []
        touched: set[tuple[int, str, str]] = set()
        for d in drafts:
            seq = head_seq + 1
            h = chain_hash(seq, now, d, head_hash)
            s._execute(
                f"INSERT INTO dpl_entries ({COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (seq, now, d.epoch, d.scope, d.metric, d.policy_name, d.policy_version,
                 d.policy_hash, d.edges_version, json.dumps(d.facts.as_dict()), d.unit,
                 fraction_text(d.charge), d.cohort, json.dumps(list(d.output)), d.release_id,
                 d.request_hash, head_hash, h),
            )  # fmt: skip
            self.spend(d.epoch)  # make sure the epoch's totals are loaded
            totals = self._spend[d.epoch]
            key = (d.scope, d.metric)
            totals[key] = totals.get(key, Fraction(0)) + d.charge
            touched.add((d.epoch, d.scope, d.metric))
            out.append(Entry(seq, now, d, head_hash, h))
            head_seq, head_hash = seq, h
        for epoch, scope, metric in sorted(touched):
            total = fraction_text(self._spend[epoch][(scope, metric)])
            s._upsert_spend(epoch, scope, metric, total)
        s._set_meta(("head_seq", str(head_seq)), ("head_hash", head_hash))
        return out


class SqlStore(ABC):
    """Shared SQL for the ledger's stores; subclasses supply connection and locking."""

    placeholder = "?"

    def __init__(self, mode: Mode) -> None:
        if mode not in ("read", "write", "create"):
            raise StoreError(f"mode must be 'read', 'write' or 'create', got {mode!r}")
        self.mode: Mode = mode
        self._lock = threading.RLock()
        self._bound: dict[int, tuple[str, str]] = {}  # epoch -> (policy hash, version)
        self._recorded: set[str] = set()  # policy hashes known to be recorded

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

    @abstractmethod
    def exists(self) -> bool:
        """Whether the ledger has been created (a pending ``create`` store has not)."""

    @abstractmethod
    def create(self, meta: dict[str, str]) -> None:
        """Create the ledger (schema, append-only guards, ``meta``) unless it exists.

        Safe against concurrent creators: exactly one creates, the others open it.
        """

    @abstractmethod
    def close(self) -> None:
        """Release the connection."""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the ledger lives (path or URL without password)."""

    def _upsert_spend(self, epoch: int, scope: str, metric: str, total: str) -> None:
        """Set the spend total of one (scope, metric)."""
        self._execute(
            "INSERT INTO dpl_spend (epoch, scope, metric, total) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (epoch, scope, metric) DO UPDATE SET total = excluded.total",
            (epoch, scope, metric, total),
        )

    def _set_meta(self, *pairs: tuple[str, str]) -> None:
        """Set meta values, in one statement."""
        rows = ", ".join("(?, ?)" for _ in pairs)
        self._execute(
            f"INSERT INTO dpl_meta (key, value) VALUES {rows} "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [x for pair in pairs for x in pair],
        )

    # -- shared SQL -------------------------------------------------------------------

    def _sql(self, sql: str) -> str:
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._raw_execute(self._sql(sql), params)

    def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._raw_execute(self._sql(sql), params)

    def _create_schema(self, statements: Sequence[str], meta: dict[str, str]) -> None:
        """Run the schema statements and write ``meta`` if the ledger has none yet."""
        for stmt in statements:
            self._raw_execute(stmt)
        if not self._fetchall("SELECT 1 FROM dpl_meta LIMIT 1"):
            self._set_meta(("schema_version", SCHEMA_VERSION), *meta.items())

    def _require(self) -> None:
        if not self.exists():
            raise LedgerNotFound(
                f"no ledger at {self.location} yet: nothing has been released into it"
            )

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

    def _find_release(self, release_id: str) -> Entry | None:
        rows = self._fetchall(
            f"SELECT {COLUMNS} FROM dpl_entries WHERE release_id = ?", (release_id,)
        )
        return row_to_entry(rows[0]) if rows else None

    def _record_policy(self, policy_hash: str, name: str, version: str, body: str) -> None:
        if policy_hash in self._recorded:
            return
        rows = self._fetchall("SELECT hash FROM dpl_policies WHERE version = ?", (version,))
        if not rows:
            self._execute(
                "INSERT INTO dpl_policies (hash, name, version, body) VALUES (?, ?, ?, ?)",
                (policy_hash, name, version, body),
            )
        elif any(str(h) != policy_hash for (h,) in rows):
            raise PolicyMismatch(message=_conflict(self.location, name, version))
        self._recorded.add(policy_hash)

    def _read_spend(self, epoch: int) -> dict[tuple[str, str], Fraction]:
        rows = self._fetchall(
            "SELECT scope, metric, total FROM dpl_spend WHERE epoch = ?", (epoch,)
        )
        try:
            return {(str(scope), str(metric)): Fraction(total) for scope, metric, total in rows}
        except (ValueError, TypeError, ZeroDivisionError) as e:
            raise LedgerCorrupted(
                f"{self.location}: the spend of epoch {epoch} is unreadable ({e}); run "
                "`dpledger ledger verify` and restore the ledger from a backup"
            ) from e

    # -- opening ----------------------------------------------------------------------

    def check_binding(self, binding: dict[str, str]) -> dict[str, str]:
        """Validate an existing ledger's schema version and binding; return its meta.

        A ledger bound to another policy name or budget unit raises
        :class:`LedgerCorrupted` (its spend would be read against the wrong budget).
        """
        meta = self.meta()
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
        return meta

    def recorded_policy_hashes(self, version: str) -> list[str]:
        """Content hashes recorded for a policy version (more than one is a conflict)."""
        with self._lock:
            rows = self._fetchall("SELECT hash FROM dpl_policies WHERE version = ?", (version,))
        return [str(h) for (h,) in rows]

    # -- transactions -----------------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[WriteTxn]:
        """A transaction under the ledger-wide write lock; commits on normal exit."""
        if self.mode == "read":
            raise StoreError(f"{self.location} was opened for reading (mode='read')")
        self._require()
        with self._lock, self._write_transaction():
            yield WriteTxn(self)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside see one committed state, whatever other writers commit meanwhile."""
        self._require()
        with self._lock, self._read_transaction():
            yield

    # -- reads (an existing ledger) ---------------------------------------------------

    def epoch_policy(self, epoch: int) -> tuple[str, str] | None:
        """``(policy hash, version)`` of the epoch's first entry, or None if it is unopened.

        An epoch is bound to the policy it was opened under: its budget and regions.
        """
        with self._lock:
            return self._epoch_policy(epoch)

    def find_release(self, release_id: str) -> Entry | None:
        """The committed entry recorded under ``release_id``, if any."""
        with self._lock:
            return self._find_release(release_id)

    def policy_body(self, policy_hash: str) -> str | None:
        """The recorded JSON of a policy the ledger has released under."""
        with self._lock:
            rows = self._fetchall("SELECT body FROM dpl_policies WHERE hash = ?", (policy_hash,))
        return str(rows[0][0]) if rows else None

    def epoch_spend(self, epoch: int) -> EpochSpend:
        """Exact committed spend per (scope, metric) in ``epoch``."""
        with self._lock:
            return EpochSpend(self._read_spend(epoch))

    def spent(self, epoch: int) -> dict[str, Fraction]:
        """Exact committed spend per scope in ``epoch``, summed over metrics."""
        return self.epoch_spend(epoch).by_scope()

    def meta(self) -> dict[str, str]:
        """The meta table (schema version, policy binding, labels, chain head)."""
        with self._lock:
            return {str(k): str(v) for k, v in self._fetchall("SELECT key, value FROM dpl_meta")}

    def rows(self, table: str, columns: str, order: str) -> list[tuple[Any, ...]]:
        """Every row of one ledger table, unparsed (for the audit, which parses defensively)."""
        if table not in ("dpl_meta", "dpl_spend", "dpl_policies"):
            raise StoreError(f"not a ledger table: {table!r}")
        with self._lock:
            return self._fetchall(f"SELECT {columns} FROM {table} ORDER BY {order}")

    def raw_entries(self, *, after: int, limit: int) -> list[tuple[Any, ...]]:
        """Entry rows after ``seq`` in chain order, unparsed (for the audit)."""
        with self._lock:
            return self._fetchall(
                f"SELECT {COLUMNS} FROM dpl_entries WHERE seq > ? ORDER BY seq LIMIT {int(limit)}",
                (after,),
            )

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
        sql = f"SELECT {COLUMNS} FROM dpl_entries WHERE {' AND '.join(where)} ORDER BY seq"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._lock:
            rows = self._fetchall(sql, params)
        return [row_to_entry(r) for r in rows]

    def policy_epochs(self) -> list[tuple[int, str]]:
        """``(first epoch, policy hash)`` of every policy entries were released under."""
        with self._lock:
            rows = self._fetchall(
                "SELECT MIN(epoch), policy_hash FROM dpl_entries GROUP BY policy_hash "
                "ORDER BY MIN(epoch)"
            )
        return [(int(e), str(h)) for e, h in rows]

    def count(self) -> int:
        """Number of committed entries."""
        with self._lock:
            return int(self._fetchall("SELECT COUNT(*) FROM dpl_entries")[0][0])


def _conflict(location: str, name: str, version: str) -> str:
    return (
        f"{location} already recorded policy {name} version {version} with other contents: "
        "a changed policy needs a new version (bump `version` in the policy file)"
    )
