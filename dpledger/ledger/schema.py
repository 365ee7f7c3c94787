"""The ledger's tables, in the SQL both stores share, and how an entry row is read.

Schema 4 (:data:`SCHEMA`, plus each store's triggers guarding entries and spend); the
dialect-specific statements each store writes for itself (:class:`Statements`,
:class:`Schema1`); :func:`row_to_entry`, which parses a row without trusting it (an
unreadable value is :class:`~dpledger.errors.LedgerCorrupted`), and the readers of other
stored values (:func:`stored_amount`, :func:`stored_int`, :func:`head_of`).
"""

from __future__ import annotations

import json
import re
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

from dpledger._shown import shown
from dpledger.errors import InvalidInput, LedgerCorrupted, LedgerSchemaUnsupported
from dpledger.ledger.records import GENESIS, Entry, EntryDraft
from dpledger.mechanisms import MechanismFacts
from dpledger.policy import Policy
from dpledger.types import Budget, Unit

__all__ = [
    "AMOUNT_FORM",
    "CHAIN_V1_THROUGH",
    "COLUMNS",
    "EPOCH_INDEX",
    "PARAMETERLESS",
    "READABLE_VERSIONS",
    "SCHEMA",
    "SCHEMA_1_COLUMNS",
    "SCHEMA_VERSION",
    "SPEND_TABLE",
    "Schema1",
    "Statements",
    "checked_head",
    "head_of",
    "later_schema",
    "missing_hint",
    "policy_conflict",
    "recorded_policy",
    "row_to_entry",
    "stored_amount",
    "stored_int",
]

SCHEMA_VERSION = "4"
READABLE_VERSIONS = ("2", "3", "4")
"""Schema versions this dpledger opens, reads and writes as they are (2, 3 and 4 have the
same tables and columns; 3 drops the entries' unique ``hash`` index and orders the epoch
index by ``seq``; 4 adds triggers refusing to lower or delete a spend total). An older
ledger is never upgraded by opening it: only by ``dpledger ledger migrate``."""

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

EPOCH_INDEX = "CREATE INDEX IF NOT EXISTS dpl_entries_epoch ON dpl_entries (epoch, seq)"
"""Finds an epoch's first entry (its policy binding). Ordered by ``seq``, so a round's
inserts append to one leaf instead of one per region."""

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
        hash TEXT NOT NULL
    )""",
    SPEND_TABLE,
    EPOCH_INDEX,
    """CREATE TABLE IF NOT EXISTS dpl_policies (
        hash TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        version TEXT NOT NULL,
        body TEXT NOT NULL
    )""",
)
"""Schema 3. ``hash`` carries no unique index (schema 2 had one): two entries with one
hash would need one ``seq`` (the hash covers it), which the primary key refuses, and
:func:`~dpledger.ledger.audit.verify` re-derives every hash and link. The index cost a
random B-tree insert per entry, most of the pages a round's commit wrote."""


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
            Budget(stored_amount(charge), cast(Unit, _text(unit))),
            _int(cohort), out, None if release_id is None else _text(release_id),
            None if request_hash is None else _text(request_hash),
            None if principal is None else _text(principal),
        )  # fmt: skip
        return Entry(_int(seq), _text(created), draft, _text(prev), _text(h))
    except (ValueError, TypeError, ZeroDivisionError, AttributeError, RecursionError,
            InvalidInput) as e:  # fmt: skip
        said = str(e)[:200] or type(e).__name__
        raise LedgerCorrupted(
            f"entry {shown(seq)} is damaged: its stored fields cannot be read ({said}); the "
            "ledger fails `dpledger ledger verify`: restore it from a backup"
        ) from e


AMOUNT_FORM = re.compile(r"(0|[1-9][0-9]{0,4299})(?:/([1-9][0-9]{0,4299}))?")
"""A budget amount's stored form: ``p`` or ``p/q`` (no sign, no leading zeros), at most
4300 digits a side; :func:`stored_amount` reads it."""
MAX_STORED_AMOUNT = Fraction(sys.float_info.max)
"""The largest charge or spend total a ledger can hold: the largest double. A charge is
an ε or ρ OpenDP accepted (a double); a policy's budget was unbounded before 1a94fce, so
an older ledger may hold amounts far above today's 1e9 limit (review s26: a cap of 1e18
refused such a ledger), but none beyond this. Each amount's float view is finite below it; a sum of
them beyond a double (a tampered ledger, which fails verification) reads as +inf."""


def stored_amount(value: object) -> Fraction:
    """A stored charge or spend total, read only in the form the ledger writes it
    (:func:`~dpledger.types.fraction_text`: ``"3"`` or ``"1/5"``, at most 4300 digits a
    side, at most :data:`MAX_STORED_AMOUNT`); anything else raises :class:`ValueError`
    (the caller reports the ledger corrupted). Never builds a huge integer: a decimal
    such as ``"1e9999999"`` is refused by its form, not evaluated."""
    if not isinstance(value, str):
        raise ValueError(f"a budget amount is stored as text, got {type(value).__name__}")
    m = AMOUNT_FORM.fullmatch(value) if len(value) <= 8601 else None
    if m is None and AMOUNT_FORM.fullmatch(value[1:41]) and value.startswith("-"):
        raise ValueError(f"a negative spend total or charge, {value[:40]!r}")
    if m is None:
        raise ValueError(
            f"{value[:40]!r}{'…' if len(value) > 40 else ''} is not a budget amount as the "
            "ledger writes one (an integer or p/q)"
        )
    q = Fraction(int(m[1]), int(m[2] or 1))
    if q > MAX_STORED_AMOUNT:
        raise ValueError(
            f"a budget amount above the largest double ({value[:20]}…, {len(value)} "
            "characters): no charge OpenDP accepts is that large"
        )
    return q


def _int(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {shown(v)}")
    return v


def _text(v: object) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected text, got {shown(v)}")
    return v


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
    missing_guards: str  # () -> the name of each of dpledger's own triggers the tables lack


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


def later_schema(location: str, version: object) -> LedgerSchemaUnsupported | None:
    """The refusal of a ledger whose schema ``version`` is a later one than this dpledger
    reads (a version number above :data:`SCHEMA_VERSION`), or None. A write handle checks
    the ledger's triggers before its schema: a later schema's own triggers are not
    foreign ones (review 41: a release on such a ledger said "drop them")."""
    if not (isinstance(version, str) and re.fullmatch(r"[1-9][0-9]{0,8}", version)):
        return None
    if int(version) <= int(SCHEMA_VERSION):
        return None
    return LedgerSchemaUnsupported(
        f"{location}: schema version {version!r}, this dpledger reads "
        f"{' and '.join(READABLE_VERSIONS)}: upgrade dpledger"
    )


def missing_hint(mode: str) -> str:
    """How a refusal to open a missing ledger ends, in the words of the mode asked for:
    only ``mode='create'`` creates one."""
    asked = "reading" if mode == "read" else f"mode={mode!r}"
    return (
        f"{asked} never creates one (create it with `dpledger ledger init`, or open with "
        "mode='create')"
    )


def stored_int(value: Any, location: str, what: str) -> int:
    """An integer the ledger stored (a seq, an epoch, a count); unreadable: corrupted."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        return int(value)
    raise LedgerCorrupted(
        f"{location}: {what} is unreadable ({str(value)[:40]!r}); run `dpledger ledger verify` "
        "and restore the ledger from a backup"
    )


def head_of(meta: dict[str, Any], location: str) -> tuple[int, str]:
    """``(head seq, head hash)`` from the meta table's rows; unreadable: corrupted."""
    seq = stored_int(meta.get("head_seq", 0), location, "the chain head's seq")
    digest = meta.get("head_hash", GENESIS)
    if not isinstance(digest, str):
        raise LedgerCorrupted(f"{location}: the chain head's hash is unreadable ({digest!r})")
    return seq, digest


def checked_head(
    head: tuple[int, str], last: Sequence[tuple[Any, Any]], location: str
) -> tuple[int, str]:
    """``head`` (the meta table's) if it is the last entry's ``(seq, hash)`` — ``last``
    holds that row, or nothing for an empty ledger — else :class:`LedgerCorrupted`: a
    write must not chain onto, nor a reader report, a head no entry has (an edited meta
    table, or entries deleted from the end)."""
    if last:
        (seq, digest), *_ = last
        entry = (stored_int(seq, location, "the last entry's seq"), str(digest))
    else:
        entry = (0, GENESIS)
    if head != entry:
        said = (
            f"(entry {head[0]}) is not its last entry (entry {entry[0]})"
            if head[0] != entry[0]
            else f"(entry {head[0]}, hash {head[1][:16]}…) is not its last entry's hash "
            f"({entry[1][:16]}…)"
        )
        raise LedgerCorrupted(
            f"{location}: the chain head recorded in its meta table {said}: the meta table "
            "was edited or entries were deleted; run `dpledger ledger verify` and restore "
            "the ledger from a backup"
        )
    return head


def policy_conflict(location: str, name: str, version: str) -> str:
    """The message refusing a second content for a recorded policy version."""
    return (
        f"{location} already recorded policy {name} version {version} with other contents: "
        "a changed policy needs a new version (bump `version` in the policy file)"
    )


def recorded_policy(body: str | None, policy_hash: str, location: str) -> Policy:
    """The policy recorded under ``policy_hash`` from its stored ``body``, checked as verify
    checks it; a missing, unreadable or edited body is :class:`LedgerCorrupted`."""
    if body is None:
        raise LedgerCorrupted(f"policy {policy_hash[:12]}… is not recorded in {location}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its warnings were shown when it was in use
            read = Policy.from_mapping(
                json.loads(body), source=f"recorded policy {policy_hash[:12]}", recorded=True
            )
    except (ValueError, RecursionError) as e:
        raise LedgerCorrupted(
            f"the recorded policy {policy_hash[:12]}… in {location} is unreadable "
            f"({e}); run `dpledger ledger verify`"
        ) from None
    if read.content_hash != policy_hash:  # no trigger guards the bodies (review 44)
        raise LedgerCorrupted(
            f"the recorded policy {policy_hash[:12]}… in {location} does not match its "
            "content hash (the body was edited); run `dpledger ledger verify`"
        )
    return read
