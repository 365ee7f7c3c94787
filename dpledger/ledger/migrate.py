"""Upgrade an older ledger to the current schema (4), in place.

**Schema 3 to 4** adds the spend guard: triggers refusing any UPDATE that lowers a spend
total (or moves it to another epoch, scope or metric) and any DELETE of one (and TRUNCATE
on PostgreSQL), so a hand-lowered total fails at the UPDATE instead of letting later
releases overspend until ``verify`` reports it. No row changes. A schema-4 ledger that
lacks any of these triggers (or the entries' append-only ones: dropped by hand) has them
re-created once the rest of it verifies (:mod:`.guards`); one that does not verify is
refused with nothing changed.

**Schema 2 to 3** changes indexes only: the entries' unique ``hash`` index goes (the
``seq`` primary key and :func:`~dpledger.ledger.audit.verify` already refuse what it
refused, and it cost most of a round's commit), and the epoch index is ordered by ``seq``.
Every entry keeps its values and hash; on SQLite the entries table is rebuilt with the
same columns (SQLite cannot drop a column's unique index) and ``seq`` becomes its rowid.
One transaction under the write lock, done again as the ledger then is if a release (or
another migration) moved it while this one waited for the lock. dpledger reads and writes
a schema-2 ledger as it is: only this upgrades it.

**Schema 1 to 2** (dpledger 0.1) adds a release id, a request fingerprint and a
principal to entries, a name to recorded policies, and keeps spend per (epoch, region,
metric) for the per-metric allocation check. The upgrade:

1. reads every schema-1 entry and checks it under the schema-1 rules: the sequence, each
   entry's link to its predecessor, each hash by the schema-1 rule
   (:func:`~dpledger.ledger.records.chain_hash_v1`), the head in the meta table, and the
   spend table against the sum of the charges per (epoch, region) — a ledger that fails
   is refused with nothing changed (restore it from a backup first);
2. in one transaction under the write lock, adds the new columns, recomputes the spend
   per (epoch, region, metric) exactly from the verified entries, and records the last
   schema-1 entry in the meta table (``chain_v1_through``).

No entry is rewritten: every hash, and so every chain head recorded outside the database
(``verify --expected-head``), stays valid; ``verify`` checks the old entries by the
schema-1 rule and every later one by the current rule.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpledger._pg_schema import denied
from dpledger.errors import CommitUnknown, DpLedgerError, MigrationRefused, StoreError
from dpledger.ledger import audit
from dpledger.ledger.guards import GUARDS_MISSING, missing_guards
from dpledger.ledger.opening import open_store
from dpledger.ledger.records import GENESIS, chain_hash_v1
from dpledger.ledger.schema import SCHEMA_VERSION, head_of, row_to_entry, stored_amount
from dpledger.ledger.store import SqlStore
from dpledger.types import fraction_text

__all__ = ["Migration", "migrate"]

_BATCH = 2000
_STEP_TRIES = 5  # a step refused because releases or another migration moved the ledger


@dataclass(frozen=True, slots=True)
class Migration:
    """What :func:`migrate` did: the versions, the entries kept, the unchanged head."""

    location: str
    from_version: str
    to_version: str
    entries: int
    head: tuple[int, str]  # (entry id, hash) as the last step left it: no step moves it
    restored: tuple[str, ...] = ()  # dpledger's own triggers re-created (they were missing)

    @property
    def changed(self) -> bool:
        """False when the ledger was already at the current schema, its triggers in place."""
        return self.from_version != self.to_version or bool(self.restored)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form for the CLI."""
        return {
            "location": self.location,
            "from": self.from_version,
            "to": self.to_version,
            "entries": self.entries,
            "head": f"{self.head[0]}:{self.head[1]}",
            "restored_triggers": list(self.restored),
        }


def migrate(target: str | Path) -> Migration:
    """Upgrade the ledger at ``target`` (SQLite path or ``postgresql://`` URL) to schema 4.

    Schema 1 goes to 2, then 3, then 4 (one transaction each: a crash between them leaves
    a schema-2 or -3 ledger, which dpledger reads and writes). A ledger already at 4 is
    left as it is. Raise :class:`MigrationRefused` (nothing changed) if a schema-1 ledger
    fails its own rules, or names an unknown schema; a path that is no ledger at all
    (empty, not SQLite) raises what opening it raises.
    """
    store = open_store(target, "write")
    try:
        return _migrated(store)
    except CommitUnknown as e:  # the release path's text named a spend and a release_id
        raise CommitUnknown(
            f"{store.location}: the COMMIT of a migration step failed ({e.__cause__ or e}) "
            "and its outcome is unknown: the step may have landed; fix the cause, then "
            "migrate again (it finishes the upgrade, or finds it done)"
        ) from e.__cause__
    except StoreError as e:
        if (found := _not_owner(store, e)) is None:
            raise
        raise found from e.__cause__
    finally:
        store.close()


def _not_owner(store: SqlStore, e: StoreError) -> StoreError | None:
    """Why a role that may write the ledger cannot migrate it (PostgreSQL's SQLSTATE 42501:
    ``ALTER TABLE``, ``CREATE TRIGGER`` and ``CREATE OR REPLACE FUNCTION`` need the
    owner), or None. Its error said "GRANT a writer SELECT, INSERT and UPDATE", after the
    DDL of the statement that failed, to a role that had them (review 42 diff 2); a guard
    function another role owns refused the ledger's own creator too (review 42 diff 3)."""
    if (said := denied(e)) is None:
        return None
    try:
        now = f"schema {store.meta().get('schema_version', '?')}"
    except StoreError:
        now = "the schema it was at when that step began"
    return StoreError(
        f"{store.location}: {said}: `dpledger ledger migrate` changes the ledger's tables "
        "and dpledger's trigger functions, which PostgreSQL lets only their owner do: run it "
        "as the role that owns them (the one that created the ledger, or a superuser); a "
        "function of dpledger's name another role owns (left in the ledger's schema, or "
        "planted there) is not the ledger's: have its owner drop it, then migrate again; "
        f"nothing was changed by the step that failed (the ledger is at {now})"
    )


def _migrated(store: SqlStore) -> Migration:
    """:func:`migrate` on the ledger ``store`` opened to write."""
    meta = store.meta()
    version = meta.get("schema_version", "?")
    head = head_of(meta, store.location)
    if version not in ("1", "2", "3", SCHEMA_VERSION):
        raise MigrationRefused(
            f"{store.location}: schema version {version!r} is not one this dpledger "
            f"upgrades (it upgrades 1, 2 and 3 to {SCHEMA_VERSION})"
        )
    if version == SCHEMA_VERSION:
        restored = _restored_guards(store, head)
        return Migration(store.location, version, version, store.count(), head, restored)
    restored = _missing_entries_guards(store)  # the last step creates them (review 42)
    if version == "1":
        _, spend = _verified_schema_1(store, head)
        try:
            store.upgrade_schema_1(head, spend)
        except CommitUnknown as e:
            _unless_unlanded(store, meta, "1", e)
            raise
    if version in ("1", "2"):
        head = _step(store, "2", store.upgrade_schema_2)
    if version in ("1", "2", "3"):
        head = _step(store, "3", store.upgrade_schema_3)
    return Migration(store.location, version, SCHEMA_VERSION, store.count(), head, restored)


def _missing_entries_guards(store: SqlStore) -> tuple[str, ...]:
    """The entries' append-only triggers an older ledger lacks (dropped by hand; it has no
    spend guard yet). The step to schema 4 creates every own trigger missing, as SQLite's
    step to 3 always re-created these: it left them out, and every writer then refused
    the schema-4 ledger migrate had just reported upgraded (review 42)."""
    return tuple(str(n) for (n,) in store.audit_rows("guards") if str(n).startswith("dpl_e"))


def _restored_guards(store: SqlStore, head: tuple[int, str]) -> tuple[str, ...]:
    """Re-create the triggers a schema-4 ledger lacks, if the rest of it verifies (the
    chain, the head, every spend total against its entries, the policies' budgets)."""
    missing = missing_guards(store)
    if not missing:
        return ()
    report = audit.verify(store, None)
    problems = [p for p in report.problems if not p.startswith(GUARDS_MISSING)]
    if problems:
        raise MigrationRefused(
            f"{store.location} lacks {GUARDS_MISSING} {', '.join(missing)} and does not "
            f"verify: {'; '.join(problems[:5])}: nothing was changed; restore the ledger "
            "from a backup"
        )
    store.restore_guards(head)  # refused if a release landed since the head was read
    return tuple(missing)


def _verified_schema_1(
    store: SqlStore, head: tuple[int, str]
) -> tuple[int, list[tuple[int, str, str, str]]]:
    """Check a schema-1 ledger by its own rules; its entry count and exact new spend rows."""
    problems: list[str] = []
    per_metric: dict[tuple[int, str, str], Fraction] = {}
    prev_seq, prev_hash, count = 0, GENESIS, 0
    while batch := store.schema_1_entries(after=prev_seq, limit=_BATCH):
        for row in batch:
            count += 1
            try:
                e = row_to_entry(row)
                mechanism: Any = json.loads(row[9])
                recomputed = chain_hash_v1(e.seq, e.created_at, e.draft, e.prev_hash, mechanism)
            except (DpLedgerError, ValueError, TypeError) as err:
                raise MigrationRefused(
                    f"{store.location}: entry {row[0]!r} is unreadable ({err}): nothing was "
                    "changed; restore the ledger from a backup before migrating"
                ) from err
            if e.seq != prev_seq + 1 or e.prev_hash != prev_hash:
                problems.append(f"entry {e.seq} does not follow entry {prev_seq}")
            if recomputed != e.hash:
                problems.append(f"entry {e.seq}: content does not match its hash")
            key = (e.draft.epoch, e.draft.region, e.draft.metric)
            per_metric[key] = per_metric.get(key, Fraction(0)) + e.draft.charge.amount
            prev_seq, prev_hash = e.seq, e.hash
    if (prev_seq, prev_hash) != head:
        problems.append(f"the recorded head {head[0]} is not the last entry {prev_seq}")
    per_scope: dict[tuple[int, str], Fraction] = {}
    for (epoch, region, _), v in per_metric.items():
        per_scope[epoch, region] = per_scope.get((epoch, region), Fraction(0)) + v
    try:
        stored = {(int(ep), str(sc)): stored_amount(t) for ep, sc, t in store.schema_1_spend()}
    except (ValueError, TypeError, ZeroDivisionError) as err:
        problems.append(f"the spend table is unreadable ({err})")
        stored = per_scope
    if stored != per_scope:
        problems.append("the spend table does not equal the sum of the entries' charges")
    problems += _unnamed_policies(store)
    if problems:
        raise MigrationRefused(
            f"{store.location} does not verify under schema 1: {'; '.join(problems[:5])}: "
            "nothing was changed; restore the ledger from a backup before migrating"
        )
    rows = [(ep, rg, m, fraction_text(v)) for (ep, rg, m), v in sorted(per_metric.items())]
    return count, rows


def _step(store: SqlStore, old: str, upgrade: Callable[[tuple[int, str]], None]) -> tuple[int, str]:
    """Upgrade the ledger from schema ``old`` as it is when the step starts; its head.

    A schema-2 or -3 ledger takes releases: one may land between the steps, which change
    no row (review 41: it refused the next step, "nothing was changed", after the first
    had committed). Another migration of the same ledger may have taken it past ``old``
    meanwhile: this step is then done (it said "nothing was changed; migrate again" after
    this migration's first step had committed, of a ledger left at schema 4). Either may
    happen while the step waits for the lock, after it read the ledger: the step refused
    is then done again as the ledger now is (review 41 diff 2), a few times at most."""
    later = [str(v) for v in range(int(old) + 1, int(SCHEMA_VERSION) + 1)]
    attempt = 1
    while True:
        meta = store.meta()
        head = head_of(meta, store.location)
        if meta.get("schema_version") in later:  # done; anything else is refused
            return head
        try:
            upgrade(head)
            return head
        except StoreError as e:  # refused: the ledger changed meanwhile, or the store failed
            _unless_unlanded(store, meta, old, e)
            if attempt == _STEP_TRIES or store.meta() == meta:
                raise
            attempt += 1


def _unless_unlanded(store: SqlStore, meta: dict[str, str], old: str, e: StoreError) -> None:
    """Raise a plain StoreError for a step's :class:`CommitUnknown` when the ledger reads
    back as ``meta``, as before the step: it did not land (review 44 diff 4: it said "the
    spend may have been recorded", of a migration the ledger shows changed nothing). A
    read-back that fails leaves it unknown: ``e`` (review 44 diff 5)."""
    if not isinstance(e, CommitUnknown):
        return
    try:
        now = store.meta()
    except StoreError:
        raise e from e.__cause__
    if now == meta:
        raise StoreError(
            f"{store.location}: the COMMIT of the step from schema {old} failed "
            f"({e.__cause__ or e}) and the ledger reads as before it: nothing was changed; "
            "fix the cause, then migrate again"
        ) from e.__cause__


def _unnamed_policies(store: SqlStore) -> list[str]:
    """Recorded policies whose body names no policy: the upgrade copies each body's name
    into the new ``name`` column (review 41: an unreadable body failed it half way with
    SQLite's bare "malformed JSON" or "NOT NULL constraint failed")."""
    found = []
    for h, body in store.schema_1_policies():
        try:
            parsed = json.loads(body, parse_constant=_no_constant) if isinstance(body, str) else 0
            named = isinstance(parsed, dict) and isinstance(parsed.get("name"), str)
        except (ValueError, RecursionError):
            named = False
        if not named:
            found.append(f"recorded policy {str(h)[:12]}…'s body is unreadable (names no policy)")
    return found


def _no_constant(word: str) -> None:
    raise ValueError(f"{word} is not JSON")
