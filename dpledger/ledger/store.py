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

import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

from dpledger._shown import shown
from dpledger.accounting import EpochSpend
from dpledger.errors import (
    LedgerCorrupted,
    LedgerNotFound,
    LedgerOfAnotherPolicy,
    LedgerSchemaUnsupported,
    MigrationRefused,
    PolicyMismatch,
    StoreError,
)
from dpledger.ledger.records import Entry
from dpledger.ledger.schema import (
    CHAIN_V1_THROUGH,
    READABLE_VERSIONS,
    SCHEMA_VERSION,
    Schema1,
    Statements,
    checked_head,
    head_of,
    policy_conflict,
    row_to_entry,
    stored_amount,
    stored_int,
)
from dpledger.ledger.txn import TxnState, WriteTxn
from dpledger.types import Mode

__all__ = ["SqlStore"]

_NO_LIMIT = 2**62  # entries(limit=None): every row, as one fixed statement
_LAST = "last_entry"  # the state statement's row of the last entry: (NULL, _LAST, seq, hash)


class SqlStore(ABC):
    """The ledger's store interface and the logic both stores share.

    A subclass supplies its connection, its write lock, how a new ledger comes into
    existence, and its :class:`Statements` (its own SQL).
    """

    sql: Statements
    schema_1: Schema1
    schema_3_upgrade: tuple[str, ...]  # DDL from schema 2 to 3, run in order in one txn
    schema_3_refuses: str = ""  # () -> seqs the schema-3 table could not hold, if any
    guards: tuple[str, ...]  # DDL creating dpledger's own triggers where missing (3 to 4)

    def __init__(self, mode: Mode) -> None:
        if mode not in ("read", "write", "create"):
            raise StoreError(f"mode must be 'read', 'write' or 'create', got {shown(mode)}")
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

    @contextmanager
    def _write_transaction(self, epochs: Sequence[int] = ()) -> Iterator[None]:
        """Begin a transaction holding the ledger-wide write lock; commit or roll back.

        ``epochs`` are those whose spend the transaction will load first: a store may
        read their state with the lock, in one round trip (:meth:`_state_rows`).
        """
        with self._begin_write(epochs, None):
            yield

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
        return {e.draft.release_id: e for e in entries if e.draft.release_id and e.seq > 0}

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

    def _flushed(
        self,
        head: tuple[int, str],
        spend: dict[int, dict[tuple[str, str], Fraction]],
        scopes: dict[int, dict[str, Fraction]],
    ) -> None:
        """The state a write transaction leaves if it commits (head, the loaded epochs' full
        spend), which a store may keep for its next one (SQLite does); by default not."""
        del head, spend, scopes

    def _load_state(self, epochs: Sequence[int], release_ids: Sequence[str]) -> TxnState:
        """The head and the epochs' spend in one query (plus one for release ids)."""
        rows = self._state_rows(epochs)
        head = {str(k): str(v) for e, k, _, v in rows if e is None and k != _LAST}
        last = [(m, v) for e, k, m, v in rows if e is None and k == _LAST]
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
        chain = checked_head(head_of(head, self.location), last, self.location)
        return TxnState(spend, chain, self._find_releases(release_ids))

    def head(self) -> tuple[int, str]:
        """The chain head the meta table records, checked against the last entry (one
        read): :class:`~dpledger.errors.LedgerCorrupted` when they disagree (an edited
        meta table, or entries deleted from the end)."""
        with self._lock:
            return self._load_state([], []).head

    def _total(self, text: Any) -> Fraction:
        """A spend total's exact value, parsed once per distinct text.

        The texts this store wrote itself are remembered as it writes them, so a writer
        re-reading the spend it committed pays no rational parsing (the cache maps a text
        to the value it denotes: what is read is what is parsed, whoever wrote it).
        """
        if not isinstance(text, str):
            return stored_amount(text)  # not text: parsed as it is, and never cached
        value = self._totals.get(text)
        if value is None:
            value = stored_amount(text)  # unreadable text raises: the caller names the ledger
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
            return {
                (str(scope), str(metric)): stored_amount(total) for scope, metric, total in rows
            }
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

    def schema_1_policies(self) -> list[tuple[Any, ...]]:
        """The schema-1 recorded policies: ``(hash, body)`` rows, unparsed."""
        with self._lock:
            return self._execute("SELECT hash, body FROM dpl_policies ORDER BY hash")

    def upgrade_schema_1(
        self, head: tuple[int, str], spend: Sequence[tuple[int, str, str, str]]
    ) -> None:
        """Upgrade schema 1 to 2 in one transaction under the write lock, entries untouched:
        refused if a writer appended since the verified ``head``; ``spend`` is the exact
        spend per (epoch, region, metric) recomputed from the verified entries."""
        inserts = [(self.schema_1.insert_spend, row) for row in spend]
        marker = (CHAIN_V1_THROUGH, str(head[0]))
        self._upgrade("1", "2", head, [*((s, ()) for s in self.schema_1.upgrade), *inserts], marker)

    def upgrade_schema_2(self, head: tuple[int, str]) -> None:
        """Upgrade schema 2 to 3 (:data:`SCHEMA`'s indexes) in one transaction under the
        lock; only indexes change (SQLite rebuilds the table to drop one). Refused if a
        writer appended since ``head``, or an entry's ``seq`` is not an integer."""
        if self.schema_3_refuses:
            with self._lock:
                bad = self._execute(self.schema_3_refuses)
            if bad:
                raise MigrationRefused(
                    f"{self.location}: entries {', '.join(repr(s) for (s,) in bad)} have a seq "
                    "that is not an integer (edited): nothing was changed; run `dpledger "
                    "ledger verify` and restore the ledger from a backup before migrating"
                )
        self._upgrade("2", "3", head, [(s, ()) for s in self.schema_3_upgrade])

    def upgrade_schema_3(self, head: tuple[int, str]) -> None:
        """Upgrade schema 3 to 4 (the spend guard's triggers, and any own one missing) in one
        transaction, under the lock; no row changes. Refused, changing nothing, if a writer
        appended since ``head``."""
        self._upgrade("3", "4", head, [(s, ()) for s in self.guards])

    def restore_guards(self, head: tuple[int, str]) -> None:
        """Re-create the own triggers a schema-4 ledger lacks (:mod:`.guards`), as above."""
        self._upgrade(SCHEMA_VERSION, SCHEMA_VERSION, head, [(s, ()) for s in self.guards])

    def _upgrade(
        self,
        old: str,
        new: str,
        head: tuple[int, str],
        statements: Sequence[tuple[str, Sequence[Any]]],
        *meta: tuple[str, str],
    ) -> None:
        if self.mode == "read":
            raise StoreError(f"{self.location} was opened for reading (mode='read')")
        with self._lock, self._write_transaction():
            found = dict(self._execute(self.sql.meta))
            now = head_of(found, self.location)
            if found.get("schema_version") != old or now != head:
                raise StoreError(
                    f"{self.location} changed while it was being migrated (head {now[0]}, "
                    f"schema {found.get('schema_version')!r}): nothing was changed; migrate again"
                )
            for statement, params in statements:
                self._execute(statement, params)
            self._set_meta(("schema_version", new), *meta)

    # -- opening ----------------------------------------------------------------------

    def check_as_writer(self) -> None:  # noqa: B027 (a hook: only PostgreSQL has a case)
        """Refuse, as a write would, a ledger this store may read but not write (none here)."""

    def check_schema(self) -> None:
        """Refuse a ledger of another schema version: this dpledger cannot read it at all."""
        meta = self.meta()
        if meta.get("schema_version") == "1":
            raise LedgerSchemaUnsupported(
                f"{self.location} was written by dpledger 0.1 (schema 1): upgrade it in place "
                f"with `dpledger ledger migrate --ledger {self.location}` (one transaction; "
                "every entry and its hash are kept, so recorded chain heads stay valid)"
            )
        version = meta.get("schema_version")
        if not (isinstance(version, str) and re.fullmatch(r"[1-9][0-9]{0,8}", version)):
            # not a version number at all: damage, not a newer schema (audit s29, F13)
            raise LedgerCorrupted(
                f"{self.location} is damaged: its schema version {shown(version)} is not a "
                "version number; it fails `dpledger ledger verify`: restore it from a backup"
            )
        if version not in READABLE_VERSIONS:
            raise LedgerSchemaUnsupported(
                f"{self.location}: schema version {meta.get('schema_version')!r}, this "
                f"dpledger reads {' and '.join(READABLE_VERSIONS)}: upgrade dpledger"
            )

    def check_binding(self, binding: dict[str, str]) -> dict[str, str]:
        """Validate an existing ledger's policy binding; return its meta.

        A ledger bound to another policy name or budget unit raises
        :class:`~dpledger.errors.LedgerOfAnotherPolicy` (its spend would be read against the
        wrong budget): a :class:`PolicyMismatch` (the caller brought the wrong policy; the
        ledger itself is sound) that is also the :class:`LedgerCorrupted` it used to be.
        """
        meta = self.meta()
        for k, v in binding.items():
            if meta.get(k) is None:
                raise LedgerCorrupted(f"{self.location}: the ledger's {k} is not recorded")
            if meta.get(k) != v:
                raise LedgerOfAnotherPolicy(
                    message=f"{self.location}: this ledger belongs to {k}={meta.get(k)!r}, "
                    f"not {v!r}; open it with its own policy, or start a new ledger"
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

    @abstractmethod
    @contextmanager
    def _begin_write(
        self, epochs: Sequence[int], meanwhile: Callable[[], object] | None
    ) -> Iterator[None]:
        """The write transaction (:meth:`_write_transaction`), ``meanwhile`` run once before
        its first read: SQLite runs it before taking the lock, PostgreSQL while the round
        trip that takes it is under way. One generator per release, not two nested."""

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
        """Every row of ``"meta"``, ``"policies"`` or ``"spend"``, unparsed (for the audit);
        ``"guards"``: the name of each of dpledger's own triggers the tables lack."""
        statement = {
            "meta": self.sql.audit_meta,
            "policies": self.sql.audit_policies,
            "spend": self.sql.audit_spend,
            "guards": self.sql.missing_guards,
        }.get(table)
        if statement is None:
            raise StoreError(f"not a ledger table: {table!r}")
        with self._lock:
            return self._execute(statement)

    def integrity_problems(self) -> list[str]:
        """What the database engine's own consistency check finds (pages, indexes), for
        the audit: nothing by default; SQLite runs ``PRAGMA quick_check``."""
        return []

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
        return [(stored_int(e, self.location, "an epoch"), str(h)) for e, h in rows]

    def epochs(self) -> list[int]:
        """Every epoch that has a committed release, ascending."""
        with self._lock:
            rows = self._execute(self.sql.epochs)
        return [stored_int(e, self.location, "an epoch") for (e,) in rows]

    def count(self) -> int:
        """Number of committed entries."""
        with self._lock:
            rows = self._execute(self.sql.count)
        return stored_int(rows[0][0], self.location, "the entry count")
