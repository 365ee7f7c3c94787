"""SQLite's dialect of the ledger's schema and statements (``?`` parameters, JSON arrays
for lists, ``seq`` as the rowid): what :mod:`.sqlite` sends."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from dpledger.errors import LedgerCorrupted
from dpledger.ledger.schema import (
    AMOUNT_FORM,
    COLUMNS,
    EPOCH_INDEX,
    PARAMETERLESS,
    SCHEMA,
    SCHEMA_1_COLUMNS,
    SPEND_TABLE,
    Schema1,
    Statements,
    later_schema,
)

__all__ = [
    "GUARDS",
    "INSERT_ENTRY",
    "SCHEMA_1",
    "SCHEMA_3_UPGRADE",
    "SPEND_GUARD",
    "SQL",
    "TABLES",
    "TRIGGERS",
    "UPSERT_SPEND",
    "foreign_triggers",
    "guard_spend",
]

_TRIGGERS = (
    """CREATE TRIGGER IF NOT EXISTS dpl_entries_no_update BEFORE UPDATE ON dpl_entries
       BEGIN SELECT RAISE(ABORT, 'dpledger entries are append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS dpl_entries_no_delete BEFORE DELETE ON dpl_entries
       BEGIN SELECT RAISE(ABORT, 'dpledger entries are append-only'); END""",
)
_LOWERED = "dpl_spend_lowered(OLD.total, NEW.total)"
SPEND_GUARD = (
    f"""CREATE TRIGGER IF NOT EXISTS dpl_spend_no_decrease BEFORE UPDATE ON dpl_spend
       WHEN NEW.epoch IS NOT OLD.epoch OR NEW.scope IS NOT OLD.scope
       OR NEW.metric IS NOT OLD.metric OR {_LOWERED}
       BEGIN SELECT RAISE(ABORT, 'dpledger spend totals never decrease nor move'); END""",
    """CREATE TRIGGER IF NOT EXISTS dpl_spend_no_delete BEFORE DELETE ON dpl_spend
       BEGIN SELECT RAISE(ABORT, 'dpledger spend totals are never deleted'); END""",
    # INSERT OR REPLACE deletes the row it replaces without firing the DELETE trigger
    f"""CREATE TRIGGER IF NOT EXISTS dpl_spend_no_replace BEFORE INSERT ON dpl_spend
       WHEN EXISTS (SELECT 1 FROM dpl_spend AS OLD WHERE OLD.epoch = NEW.epoch
       AND OLD.scope = NEW.scope AND OLD.metric = NEW.metric AND {_LOWERED})
       BEGIN SELECT RAISE(ABORT, 'dpledger spend totals never decrease nor move'); END""",
)
"""Schema 4: the database refuses to lower, move or delete a spend total. SQL cannot
compare two fractions of up to 4,300 digits a side exactly (SQLite's integers are 64-bit),
so the comparison is :func:`guard_spend`'s function, which every writing connection of
dpledger registers; any other connection's write to ``dpl_spend`` fails to prepare (no
such function), which refuses it too."""
_OWN_NAMES = sorted(t.split()[5] for t in (*_TRIGGERS, *SPEND_GUARD))


def _lowered(old: object, new: object) -> int:
    """1 when ``new`` is not a spend total as dpledger writes one (:func:`stored_amount`'s
    form), or is below ``old``: exact, cross-multiplied (it runs in every spend upsert)."""
    if not (isinstance(old, str) and isinstance(new, str) and max(len(old), len(new)) <= 8601):
        return 1
    o, n = AMOUNT_FORM.fullmatch(old), AMOUNT_FORM.fullmatch(new)
    if o is None or n is None:
        return 1
    return int(int(n[1]) * int(o[2] or 1) < int(o[1]) * int(n[2] or 1))


def guard_spend(conn: sqlite3.Connection, where: str = "") -> None:
    """Let ``conn`` write ``dpl_spend`` under :data:`SPEND_GUARD` (a function in triggers
    needs a trusted schema: the default, stated so a build without it still writes);
    :class:`LedgerCorrupted` when the database at ``where`` holds a trigger dpledger did
    not create (:func:`foreign_triggers`): nothing is written through it."""
    conn.create_function("dpl_spend_lowered", 2, _lowered, deterministic=True)
    conn.execute("PRAGMA trusted_schema=ON")
    found = foreign_triggers(conn.execute(TRIGGERS).fetchall())
    if found:
        try:  # a later schema's triggers are its own: say so, not "drop them"
            row = conn.execute("SELECT value FROM dpl_meta WHERE key = 'schema_version'")
            later = later_schema(where, next(iter(row.fetchall()), (None,))[0])
        except sqlite3.Error:
            later = None
        raise later or LedgerCorrupted(f"{where}: {found[0]}; nothing was written")


TRIGGERS = "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name"
"""Every trigger of the database, by name, as SQLite keeps its text."""


def foreign_triggers(rows: Sequence[tuple[Any, ...]]) -> list[str]:
    """Problems with the :data:`TRIGGERS` rows that are not dpledger's own triggers as it
    creates them. A trigger runs inside every write: one planted beside the ledger's (a
    ``BEFORE INSERT ON dpl_spend … RAISE(IGNORE)`` skipped every spend update, so later
    releases were approved past the budget) or one of its own rewritten, changes what a
    release records while every row still verifies (review 40)."""
    odd = [str(n) for n, text in rows if _OWN.get(str(n)) != " ".join(str(text).split())]
    if not odd:
        return []
    return [
        f"the database holds trigger(s) {', '.join(odd)} that dpledger did not create (or "
        "that were changed): they run in every write and can skip or alter what a release "
        "records; drop them, or restore the ledger from a backup"
    ]


_SEQ, _ROWID_SEQ = "seq BIGINT PRIMARY KEY", "seq INTEGER PRIMARY KEY"
_SCHEMA = tuple(statement.replace(_SEQ, _ROWID_SEQ) for statement in SCHEMA)
"""The shared schema with ``seq`` as SQLite's rowid (``INTEGER PRIMARY KEY``, 64-bit): the
entries are one B-tree keyed by ``seq``, not a table plus a unique index on it."""
_ENTRIES = next(s for s in _SCHEMA if "dpl_entries (" in s and _ROWID_SEQ in s)
SCHEMA_3_UPGRADE = (
    # SQLite cannot drop a column's UNIQUE index: the entries move, as they are, into a
    # table of the schema-3 shape (same columns and types, so the same stored values)
    _ENTRIES.replace("dpl_entries (", "dpl_entries_3 (", 1),
    f"INSERT INTO dpl_entries_3 ({COLUMNS}) SELECT {COLUMNS} FROM dpl_entries ORDER BY seq",
    "DROP TABLE dpl_entries",  # drops its indexes and triggers (none of them fires)
    "ALTER TABLE dpl_entries_3 RENAME TO dpl_entries",
    EPOCH_INDEX,
    *_TRIGGERS,
)

SQL = Statements(
    epoch_policy="SELECT policy_hash, policy_version FROM dpl_entries WHERE epoch = ? AND seq > 0 "
    "ORDER BY seq LIMIT 1",
    releases=f"SELECT {COLUMNS} FROM dpl_entries "
    "WHERE release_id IN (SELECT value FROM json_each(?))",
    policy_hashes="SELECT hash FROM dpl_policies WHERE version = ?",
    insert_policy="INSERT INTO dpl_policies (hash, name, version, body) VALUES (?, ?, ?, ?)",
    state="SELECT NULL, key, NULL, value FROM dpl_meta WHERE key IN ('head_seq', 'head_hash') "
    "UNION ALL SELECT epoch, scope, metric, total FROM dpl_spend "
    "WHERE epoch IN (SELECT value FROM json_each(?)) "
    "UNION ALL SELECT NULL, 'last_entry', seq, hash FROM "
    "(SELECT seq, hash FROM dpl_entries ORDER BY seq DESC LIMIT 1)",
    spend="SELECT scope, metric, total FROM dpl_spend WHERE epoch = ?",
    policy_body="SELECT body FROM dpl_policies WHERE hash = ?",
    set_meta="INSERT INTO dpl_meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    entries=f"SELECT {COLUMNS} FROM dpl_entries WHERE seq > ? "
    "AND (? IS NULL OR epoch = ?) AND (? IS NULL OR scope = ?) AND (? IS NULL OR metric = ?) "
    "ORDER BY seq LIMIT ?",
    missing_guards="SELECT column1 FROM (VALUES "
    + ", ".join(f"('{name}')" for name in _OWN_NAMES)
    + ") WHERE column1 NOT IN (SELECT name FROM sqlite_master WHERE type = 'trigger') "
    "ORDER BY column1",
    **PARAMETERLESS,
)
"""The store's statements, in SQLite's dialect (``?`` parameters, JSON arrays for lists)."""
SCHEMA_1 = Schema1(
    entries=f"SELECT {SCHEMA_1_COLUMNS} FROM dpl_entries WHERE seq > ? ORDER BY seq LIMIT ?",
    spend="SELECT epoch, scope, total FROM dpl_spend ORDER BY epoch, scope",
    upgrade=(
        "ALTER TABLE dpl_entries ADD COLUMN release_id TEXT",
        "ALTER TABLE dpl_entries ADD COLUMN request_hash TEXT",
        "ALTER TABLE dpl_entries ADD COLUMN principal TEXT",
        "CREATE UNIQUE INDEX dpl_entries_release_id ON dpl_entries (release_id)",
        "ALTER TABLE dpl_policies ADD COLUMN name TEXT NOT NULL DEFAULT ''",
        "UPDATE dpl_policies SET name = json_extract(body, '$.name')",
        "DROP TABLE dpl_spend",
        SPEND_TABLE,
    ),
    insert_spend="INSERT INTO dpl_spend (epoch, scope, metric, total) VALUES (?, ?, ?, ?)",
)
"""How this store reads and upgrades a schema-1 ledger (ALTER TABLE is transactional here)."""
INSERT_ENTRY = f"INSERT INTO dpl_entries ({COLUMNS}) VALUES ({', '.join(['?'] * 19)})"
UPSERT_SPEND = (
    "INSERT INTO dpl_spend (epoch, scope, metric, total) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (epoch, scope, metric) DO UPDATE SET total = excluded.total"
)
TABLES = (*_SCHEMA, *_TRIGGERS, *SPEND_GUARD)
"""What a new ledger is built with."""
GUARDS = (*_TRIGGERS, *SPEND_GUARD)
"""dpledger's own triggers, created where missing (``ledger migrate`` restores dropped ones)."""
_OWN = {
    t.split()[5]: " ".join(t.replace("IF NOT EXISTS ", "", 1).split())
    for t in (*_TRIGGERS, *SPEND_GUARD)
}
"""dpledger's triggers by name, as SQLite keeps their text (whitespace collapsed)."""
