"""SQLite's dialect of the ledger's schema and statements (``?`` parameters, JSON arrays
for lists, ``seq`` as the rowid): what :mod:`.sqlite` sends."""

from __future__ import annotations

from dpledger.ledger.schema import (
    COLUMNS,
    EPOCH_INDEX,
    PARAMETERLESS,
    SCHEMA,
    SCHEMA_1_COLUMNS,
    SPEND_TABLE,
    Schema1,
    Statements,
)

__all__ = [
    "INSERT_ENTRY",
    "SCHEMA_1",
    "SCHEMA_3_UPGRADE",
    "SQL",
    "TABLES",
    "UPSERT_SPEND",
]

_TRIGGERS = (
    """CREATE TRIGGER IF NOT EXISTS dpl_entries_no_update BEFORE UPDATE ON dpl_entries
       BEGIN SELECT RAISE(ABORT, 'dpledger entries are append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS dpl_entries_no_delete BEFORE DELETE ON dpl_entries
       BEGIN SELECT RAISE(ABORT, 'dpledger entries are append-only'); END""",
)
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
    epoch_policy="SELECT policy_hash, policy_version FROM dpl_entries WHERE epoch = ? "
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
TABLES = (*_SCHEMA, *_TRIGGERS)
"""What a new ledger is built with."""
