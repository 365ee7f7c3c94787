"""The store interface and the logic both stores share: schema, chain, spend, reads.

A store persists hash-chained entries and a per-(region, metric) spend table that is
updated in the same transaction as the entry it totals (the tables' column for a
release's region is named ``scope``). Subclasses provide the connection, their own SQL
(:class:`Statements`), the write lock (SQLite ``BEGIN IMMEDIATE``, PostgreSQL an
advisory transaction lock) and how a new ledger comes into existence.

Opening never creates: a store opened on a missing ledger either refuses
(:class:`~dpledger.errors.LedgerNotFound`, modes ``read`` and ``write``) or stays
*pending* (mode ``create``) until :meth:`SqlStore.create` runs, which the ledger calls
only for an approved release or an explicit ``init``.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, cast

from dpledger.accounting import EpochSpend
from dpledger.errors import (
    InvalidInput,
    LedgerCorrupted,
    LedgerNotFound,
    PolicyMismatch,
    StoreError,
)
from dpledger.ledger.records import GENESIS, Entry, EntryDraft, chain_hash
from dpledger.mechanisms import MechanismFacts
from dpledger.types import Budget, Mode, Unit, fraction_text

__all__ = [
    "CHAIN_V1_THROUGH",
    "COLUMNS",
    "PARAMETERLESS",
    "SCHEMA",
    "SCHEMA_1_COLUMNS",
    "SCHEMA_VERSION",
    "SPEND_TABLE",
    "Schema1",
    "SqlStore",
    "Statements",
    "TxnState",
    "WriteTxn",
    "policy_conflict",
    "row_to_entry",
]

SCHEMA_VERSION = "2"

COLUMNS = (
    "seq, created_at, epoch, scope, metric, policy_name, policy_version, policy_hash, "
    "edges_version, mechanism, unit, charge, cohort, output, release_id, request_hash, "
    "principal, prev_hash, hash"
)

SCHEMA_1_COLUMNS = COLUMNS.replace("release_id, request_hash, principal", "NULL, NULL, NULL")
"""A schema-1 entry row shaped like :data:`COLUMNS` (it has no release id, request hash
or principal)."""

CHAIN_V1_THROUGH = "chain_v1_through"
"""Meta key of a migrated ledger: entries up to this seq are hashed by the schema-1 rule."""

SPEND_TABLE = """CREATE TABLE IF NOT EXISTS dpl_spend (
        epoch BIGINT NOT NULL,
        scope TEXT NOT NULL,
        metric TEXT NOT NULL,
        total TEXT NOT NULL,
        PRIMARY KEY (epoch, scope, metric)
    )"""
"""Exact spend per (epoch, region, metric), updated in the transaction of each entry."""

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
        principal TEXT,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE
    )""",
    SPEND_TABLE,
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
     cohort, output, release_id, request_hash, principal, prev, h) = row  # fmt: skip
    try:
        facts = MechanismFacts.from_dict(json.loads(mech))
        out = tuple(float(x) for x in json.loads(output))
        draft = EntryDraft(
            _int(epoch), _text(scope), _text(metric), _text(pname), _text(pver), _text(phash),
            None if edges is None else _text(edges), facts,
            Budget(Fraction(_text(charge)), cast(Unit, _text(unit))),
            _int(cohort), out, None if release_id is None else _text(release_id),
            None if request_hash is None else _text(request_hash),
            None if principal is None else _text(principal),
        )  # fmt: skip
        return Entry(_int(seq), _text(created), draft, _text(prev), _text(h))
    except (ValueError, TypeError, ZeroDivisionError, AttributeError, RecursionError,
            InvalidInput) as e:  # fmt: skip
        raise LedgerCorrupted(f"entry {seq!r} cannot be read: {type(e).__name__}: {e}") from e


def _int(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {v!r}")
    return v


def _text(v: object) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected text, got {v!r}")
    return v


@dataclass
class TxnState:
    """What a write transaction reads under the lock, in as few round trips as the store can."""

    spend: dict[int, dict[tuple[str, str], Fraction]]  # epoch -> (scope, metric) -> total
    head: tuple[int, str]  # (seq, hash) of the chain's last entry
    found: dict[str, Entry]  # release id -> its committed entry


class WriteTxn:
    """A write transaction holding the ledger's write lock (see :meth:`SqlStore.write`).

    Drafts are staged first (the spend seen by later checks in the same transaction
    includes them), then written together by :meth:`flush`: one chained batch of
    entries, one spend update and one new head.
    """

    def __init__(self, store: SqlStore) -> None:
        self._s = store
        self._spend: dict[int, dict[tuple[str, str], Fraction]] = {}
        self._scopes: dict[int, dict[str, Fraction]] = {}  # the same, summed per scope
        self._found: dict[str, Entry | None] = {}
        self._head: tuple[int, str] | None = None
        self._staged: list[EntryDraft] = []
        self._bindings: dict[int, tuple[str, str] | None] = {}

    def load(self, epochs: Iterable[int], release_ids: Iterable[str]) -> None:
        """Read the spend of ``epochs``, the chain head and ``release_ids`` at once."""
        want = sorted(set(epochs) - set(self._spend))
        ids = sorted(set(release_ids) - set(self._found))
        state = self._s._load_state(want, ids)
        for epoch in want:
            totals = state.spend.get(epoch, {})
            self._spend[epoch] = totals
            self._scopes[epoch] = EpochSpend(totals).by_scope()
        for rid in ids:
            self._found[rid] = state.found.get(rid)
        self._head = state.head

    def spend(self, epoch: int) -> EpochSpend:
        """The epoch's exact spend per (scope, metric): committed plus staged."""
        if epoch not in self._spend:
            self.load([epoch], [])
        return EpochSpend(dict(self._spend[epoch]), dict(self._scopes[epoch]))

    def live_spend(self, epoch: int) -> EpochSpend:
        """:meth:`spend` without copying: valid only until the next :meth:`stage`.

        For a check that reads it at once (the hot path of a round under the lock).
        """
        if epoch not in self._spend:
            self.load([epoch], [])
        return EpochSpend(self._spend[epoch], self._scopes[epoch])

    def epoch_policy(self, epoch: int) -> tuple[str, str] | None:
        """``(policy hash, version)`` the epoch was opened under, read under the lock.

        Read once per epoch per transaction: nobody else writes while the lock is held.
        """
        if epoch not in self._bindings:
            self._bindings[epoch] = self._s._epoch_policy(epoch)
        return self._bindings[epoch]

    def find_release(self, release_id: str) -> Entry | None:
        """The committed entry recorded under ``release_id`` (an indexed read), if any."""
        if release_id not in self._found:
            self.load([], [release_id])
        return self._found[release_id]

    def record_policy(self, policy_hash: str, name: str, version: str, body: str) -> None:
        """Record a policy body once, refusing a second content for one version."""
        self._s._record_policy(policy_hash, name, version, body)

    def stage(self, draft: EntryDraft) -> None:
        """Add a draft to this transaction; its charge counts for the checks that follow."""
        if draft.epoch not in self._spend:  # the epoch's committed totals come first
            self.load([draft.epoch], [])
        totals, scopes = self._spend[draft.epoch], self._scopes[draft.epoch]
        key, cost = (draft.region, draft.metric), draft.charge.amount
        totals[key] = totals.get(key, Fraction(0)) + cost
        scopes[draft.region] = scopes.get(draft.region, Fraction(0)) + cost
        self._staged.append(draft)

    def flush(self) -> list[Entry]:
        """Chain, insert and total the staged drafts; visible to others only after commit."""
        if not self._staged:
            return []
        if self._head is None:
            self.load([], [])
        head_seq, head_hash = self._head or (0, GENESIS)
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        out: list[Entry] = []
        rows: list[tuple[Any, ...]] = []
        touched: set[tuple[int, str, str]] = set()
        for d in self._staged:
            seq = head_seq + 1
            h = chain_hash(seq, now, d, head_hash)
            rows.append(
                (seq, now, d.epoch, d.region, d.metric, d.policy_name, d.policy_version,
                 d.policy_hash, d.edges_version, d.facts.as_json(), d.charge.unit,
                 d.charge.text, d.cohort, json.dumps(list(d.output)), d.release_id,
                 d.request_hash, d.principal, head_hash, h)
            )  # fmt: skip
            touched.add((d.epoch, d.region, d.metric))
            out.append(Entry(seq, now, d, head_hash, h))
            head_seq, head_hash = seq, h
        spend = []
        for epoch, scope, metric in sorted(touched):
            total = self._spend[epoch][(scope, metric)]
            text = fraction_text(total)
            self._s._remember(text, total)  # read back by the next transaction's load
            spend.append((epoch, scope, metric, text))
        self._s._write_rows(rows, spend, (head_seq, head_hash))
        self._head = (head_seq, head_hash)
        self._staged = []
        return out


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement the shared store logic runs, written by each store in its own dialect.

    Parameters are positional, in the order each field's comment gives; a list
    parameter is encoded by the store's :meth:`SqlStore._list` (a JSON array for
    SQLite, an array for PostgreSQL). No statement is rewritten between dialects.
    """

    epoch_policy: str  # (epoch) -> policy_hash, policy_version of the epoch's first entry
    releases: str  # (list of release ids) -> COLUMNS of their entries
    policy_hashes: str  # (version) -> hash of every policy recorded under that version
    insert_policy: str  # (hash, name, version, body)
    state: str  # (list of epochs) -> (NULL, key, NULL, value) head rows, then spend rows
    spend: str  # (epoch) -> scope, metric, total
    policy_body: str  # (hash) -> body
    meta: str  # () -> key, value of every meta row
    set_meta: str  # (key, value): insert or replace
    entries: str  # (after, epoch, epoch, scope, scope, metric, metric, limit) -> COLUMNS
    policy_epochs: str  # () -> MIN(epoch), policy_hash per policy released under
    count: str  # () -> number of entries
    epochs: str  # () -> every epoch with spend, ascending
    audit_meta: str  # () -> key, value ordered by key
    audit_policies: str  # () -> hash, name, version, body ordered by hash
    audit_spend: str  # () -> epoch, scope, metric, total ordered by the key


PARAMETERLESS = {
    "meta": "SELECT key, value FROM dpl_meta",
    "policy_epochs": "SELECT MIN(epoch), policy_hash FROM dpl_entries GROUP BY policy_hash "
    "ORDER BY MIN(epoch)",
    "count": "SELECT COUNT(*) FROM dpl_entries",
    "epochs": "SELECT DISTINCT epoch FROM dpl_spend ORDER BY epoch",
    "audit_meta": "SELECT key, value FROM dpl_meta ORDER BY key",
    "audit_policies": "SELECT hash, name, version, body FROM dpl_policies ORDER BY hash",
    "audit_spend": "SELECT epoch, scope, metric, total FROM dpl_spend "
    "ORDER BY epoch, scope, metric",
}
"""The statements without parameters: one text that both dialects run as it is."""


@dataclass(frozen=True, slots=True)
class Schema1:
    """How a store reads and upgrades a schema-1 ledger (dpledger 0.1), in its own SQL."""

    entries: str  # (after, limit) -> rows shaped like COLUMNS (NULL for the new columns)
    spend: str  # () -> epoch, scope, total of the schema-1 spend table
    upgrade: tuple[str, ...]  # DDL run in order inside the upgrade's transaction
    insert_spend: str  # (epoch, scope, metric, total) into the new spend table


_NO_LIMIT = 2**62  # entries(limit=None): every row, as one fixed statement


class SqlStore(ABC):
    """The ledger's store interface and the logic both stores share.

    A subclass supplies its connection, its write lock, how a new ledger comes into
    existence, and its :class:`Statements` (its own SQL).
    """

    sql: Statements
    schema_1: Schema1

    def __init__(self, mode: Mode) -> None:
        if mode not in ("read", "write", "create"):
            raise StoreError(f"mode must be 'read', 'write' or 'create', got {mode!r}")
        self.mode: Mode = mode
        self._lock = threading.RLock()
        self._bound: dict[int, tuple[str, str]] = {}  # epoch -> (policy hash, version)
        self._recorded: set[str] = set()  # policy hashes known to be recorded
        self._totals: dict[str, Fraction] = {}  # spend total text -> its value

    # -- what a backend provides ------------------------------------------------------

    @abstractmethod
    def _execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement in the current transaction (or autocommit); return rows."""

    @abstractmethod
    def _list(self, values: Sequence[object]) -> object:
        """A list as one statement parameter, in this store's encoding."""

    @abstractmethod
    def _write_rows(
        self,
        entries: Sequence[tuple[Any, ...]],
        spend: Sequence[tuple[int, str, str, str]],
        head: tuple[int, str],
    ) -> None:
        """Insert entries (COLUMNS order), upsert spend totals, set the new head."""

    @abstractmethod
    @contextmanager
    def _write_transaction(self, epochs: Sequence[int] = ()) -> Iterator[None]:
        """Begin a transaction holding the ledger-wide write lock; commit or roll back.

        ``epochs`` are those whose spend the transaction will load first: a store may
        read their state with the lock, in one round trip (:meth:`_state_rows`).
        """

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

    # -- shared logic over the store's statements -------------------------------------

    def _set_meta(self, *pairs: tuple[str, str]) -> None:
        for key, value in pairs:
            self._execute(self.sql.set_meta, (key, value))

    def _require(self) -> None:
        if not self.exists():
            raise LedgerNotFound(
                f"no ledger at {self.location} yet: nothing has been released into it"
            )

    def _epoch_policy(self, epoch: int) -> tuple[str, str] | None:
        # an epoch's first entry never changes (append-only), so a binding once seen is kept
        if epoch in self._bound:
            return self._bound[epoch]
        rows = self._execute(self.sql.epoch_policy, (epoch,))
        if not rows:
            return None
        self._bound[epoch] = (str(rows[0][0]), str(rows[0][1]))
        return self._bound[epoch]

    def _find_releases(self, release_ids: Sequence[str]) -> dict[str, Entry]:
        if not release_ids:
            return {}
        rows = self._execute(self.sql.releases, (self._list(list(release_ids)),))
        entries = [row_to_entry(r) for r in rows]
        return {e.draft.release_id: e for e in entries if e.draft.release_id is not None}

    def _record_policy(self, policy_hash: str, name: str, version: str, body: str) -> None:
        if policy_hash in self._recorded:
            return
        rows = self._execute(self.sql.policy_hashes, (version,))
        if not rows:  # recorded in this transaction: known only once it commits
            self._execute(self.sql.insert_policy, (policy_hash, name, version, body))
        elif any(str(h) != policy_hash for (h,) in rows):
            raise PolicyMismatch(message=policy_conflict(self.location, name, version))
        else:
            self._recorded.add(policy_hash)  # committed by an earlier transaction

    def _load_state(self, epochs: Sequence[int], release_ids: Sequence[str]) -> TxnState:
        """The head and the epochs' spend in one query (plus one for release ids)."""
        rows = self._state_rows(epochs)
        head = {str(k): str(v) for e, k, _, v in rows if e is None}
        spend: dict[int, dict[tuple[str, str], Fraction]] = {e: {} for e in epochs}
        try:
            for e, scope, metric, total in rows:
                if e is not None:
                    spend[int(e)][(str(scope), str(metric))] = self._total(total)
        except (ValueError, TypeError, ZeroDivisionError, KeyError) as err:
            raise LedgerCorrupted(
                f"{self.location}: a spend total is unreadable ({err}); run `dpledger ledger "
                "verify` and restore the ledger from a backup"
            ) from err
        seq, digest = int(head.get("head_seq", 0)), head.get("head_hash", GENESIS)
        return TxnState(spend, (seq, digest), self._find_releases(release_ids))

    def _total(self, text: Any) -> Fraction:
        """A spend total's exact value, parsed once per distinct text.

        The texts this store wrote itself are remembered as it writes them, so a writer
        re-reading the spend it committed pays no rational parsing (the cache maps a text
        to the value it denotes: what is read is what is parsed, whoever wrote it).
        """
        if not isinstance(text, str):
            return Fraction(text)  # not text: parsed as it is, and never cached
        value = self._totals.get(text)
        if value is None:
            value = Fraction(text)  # unreadable text raises: the caller names the ledger
            self._remember(text, value)
        return value

    def _remember(self, text: str, value: Fraction) -> None:
        if len(self._totals) >= 4096:  # bounded: a long-lived writer sees ever new totals
            self._totals.clear()
        self._totals[text] = value

    def _state_rows(self, epochs: Sequence[int]) -> list[tuple[Any, ...]]:
        """The rows of the ``state`` statement for ``epochs`` (head rows, spend rows)."""
        return self._execute(self.sql.state, (self._list(list(epochs)),))

    def _read_spend(self, epoch: int) -> dict[tuple[str, str], Fraction]:
        rows = self._execute(self.sql.spend, (epoch,))
        try:
            return {(str(scope), str(metric)): Fraction(total) for scope, metric, total in rows}
        except (ValueError, TypeError, ZeroDivisionError) as e:
            raise LedgerCorrupted(
                f"{self.location}: the spend of epoch {epoch} is unreadable ({e}); run "
                "`dpledger ledger verify` and restore the ledger from a backup"
            ) from e

    # -- schema 1 (read to verify, then upgrade in place) -----------------------------

    def schema_1_entries(self, *, after: int, limit: int) -> list[tuple[Any, ...]]:
        """Entry rows of a schema-1 ledger after ``seq``, unparsed, in chain order."""
        with self._lock:
            return self._execute(self.schema_1.entries, (after, int(limit)))

    def schema_1_spend(self) -> list[tuple[Any, ...]]:
        """The schema-1 spend table: ``(epoch, scope, total)`` rows, unparsed."""
        with self._lock:
            return self._execute(self.schema_1.spend)

    def upgrade_schema_1(
        self, head: tuple[int, str], spend: Sequence[tuple[int, str, str, str]]
    ) -> None:
        """Upgrade to schema 2 in one transaction under the write lock; entries untouched.

        ``head`` is the chain head the caller verified: if a writer appended since, the
        upgrade is refused and nothing changes. ``spend`` is the exact spend per (epoch,
        region, metric) the caller recomputed from the verified entries.
        """
        if self.mode == "read":
            raise StoreError(f"{self.location} was opened for reading (mode='read')")
        with self._lock, self._write_transaction():
            meta = dict(self._execute(self.sql.meta))
            now = (int(meta.get("head_seq", 0)), str(meta.get("head_hash", GENESIS)))
            if meta.get("schema_version") != "1" or now != head:
                raise StoreError(
                    f"{self.location} changed while it was being verified (head {now[0]}, "
                    f"schema {meta.get('schema_version')!r}): nothing was changed; migrate again"
                )
            for statement in self.schema_1.upgrade:
                self._execute(statement)
            for row in spend:
                self._execute(self.schema_1.insert_spend, row)
            self._set_meta(("schema_version", SCHEMA_VERSION), (CHAIN_V1_THROUGH, str(head[0])))

    # -- opening ----------------------------------------------------------------------

    def check_schema(self) -> None:
        """Refuse a ledger of another schema version: this dpledger cannot read it at all."""
        meta = self.meta()
        if meta.get("schema_version") == "1":
            raise LedgerCorrupted(
                f"{self.location} was written by dpledger 0.1 (schema 1): upgrade it in place "
                f"with `dpledger ledger migrate --ledger {self.location}` (one transaction; "
                "every entry and its hash are kept, so recorded chain heads stay valid)"
            )
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise LedgerCorrupted(
                f"{self.location}: schema version {meta.get('schema_version')!r}, this "
                f"dpledger reads {SCHEMA_VERSION!r}: upgrade dpledger"
            )

    def check_binding(self, binding: dict[str, str]) -> dict[str, str]:
        """Validate an existing ledger's policy binding; return its meta.

        A ledger bound to another policy name or budget unit raises
        :class:`LedgerCorrupted` (its spend would be read against the wrong budget).
        """
        meta = self.meta()
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
            rows = self._execute(self.sql.policy_hashes, (version,))
        return [str(h) for (h,) in rows]

    # -- transactions -----------------------------------------------------------------

    @contextmanager
    def write(
        self, epochs: Iterable[int] = (), *, meanwhile: Callable[[], object] | None = None
    ) -> Iterator[WriteTxn]:
        """A transaction under the ledger-wide write lock; commits on normal exit.

        ``epochs``: those the transaction loads first (:meth:`WriteTxn.load`), which a
        store may read together with taking the lock. ``meanwhile``: work that needs no
        ledger state (a release's noise), run once before the transaction's first read:
        by SQLite before it takes the lock, by PostgreSQL while the round trip that takes
        it is under way. An exception from it rolls the transaction back.
        """
        if self.mode == "read":
            raise StoreError(f"{self.location} was opened for reading (mode='read')")
        self._require()
        with self._lock, self._begin_write(sorted(set(epochs)), meanwhile):
            yield WriteTxn(self)

    @contextmanager
    def _begin_write(
        self, epochs: Sequence[int], meanwhile: Callable[[], object] | None
    ) -> Iterator[None]:
        """:meth:`_write_transaction` after ``meanwhile`` (a store may overlap the two)."""
        if meanwhile is not None:
            meanwhile()
        with self._write_transaction(epochs):
            yield

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

    def find_releases(self, release_ids: Sequence[str]) -> dict[str, Entry]:
        """The committed entries recorded under ``release_ids`` (one indexed read)."""
        with self._lock:
            return self._find_releases(release_ids)

    def policy_body(self, policy_hash: str) -> str | None:
        """The recorded JSON of a policy the ledger has released under."""
        with self._lock:
            rows = self._execute(self.sql.policy_body, (policy_hash,))
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
            return {str(k): str(v) for k, v in self._execute(self.sql.meta)}

    def audit_rows(self, table: str) -> list[tuple[Any, ...]]:
        """Every row of ``"meta"``, ``"policies"`` or ``"spend"``, unparsed (for the audit)."""
        statement = {
            "meta": self.sql.audit_meta,
            "policies": self.sql.audit_policies,
            "spend": self.sql.audit_spend,
        }.get(table)
        if statement is None:
            raise StoreError(f"not a ledger table: {table!r}")
        with self._lock:
            return self._execute(statement)

    def raw_entries(self, *, after: int, limit: int) -> list[tuple[Any, ...]]:
        """Entry rows after ``seq`` in chain order, unparsed (for the audit)."""
        with self._lock:
            return self._execute(
                self.sql.entries, (after, None, None, None, None, None, None, int(limit))
            )

    def entries(
        self,
        *,
        epoch: int | None = None,
        region: str | None = None,
        metric: str | None = None,
        after: int = 0,
        limit: int | None = None,
    ) -> list[Entry]:
        """Committed entries in chain order, optionally filtered."""
        params = (after, epoch, epoch, region, region, metric, metric, limit or _NO_LIMIT)
        with self._lock:
            rows = self._execute(self.sql.entries, params)
        return [row_to_entry(r) for r in rows]

    def policy_epochs(self) -> list[tuple[int, str]]:
        """``(first epoch, policy hash)`` of every policy entries were released under."""
        with self._lock:
            rows = self._execute(self.sql.policy_epochs)
        return [(int(e), str(h)) for e, h in rows]

    def epochs(self) -> list[int]:
        """Every epoch that has a committed release, ascending."""
        with self._lock:
            return [int(e) for (e,) in self._execute(self.sql.epochs)]

    def count(self) -> int:
        """Number of committed entries."""
        with self._lock:
            return int(self._execute(self.sql.count)[0][0])


def policy_conflict(location: str, name: str, version: str) -> str:
    """The message refusing a second content for a recorded policy version."""
    return (
        f"{location} already recorded policy {name} version {version} with other contents: "
        "a changed policy needs a new version (bump `version` in the policy file)"
    )
