"""The service store's tables and statements, in either dialect (SQLite or PostgreSQL).

Kept apart from :mod:`dpledger.service.store`, which opens, creates and uses them.
"""

from __future__ import annotations

__all__ = ["TABLES", "statements"]

TABLES = (
    "CREATE TABLE IF NOT EXISTS dpl_svc_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS dpl_svc_keys (
        key_id TEXT PRIMARY KEY, name TEXT NOT NULL, algo TEXT NOT NULL, salt TEXT NOT NULL,
        digest TEXT NOT NULL, scopes TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS dpl_svc_refusals (
        id {id}, at TEXT NOT NULL, principal TEXT NOT NULL, action TEXT NOT NULL,
        status INTEGER NOT NULL, error TEXT NOT NULL, epoch BIGINT, region TEXT, metric TEXT,
        cohort BIGINT, release_id TEXT, failed TEXT NOT NULL
    )""",
)
_KEY_COLUMNS = "key_id, name, algo, salt, digest, scopes, created_at, revoked_at"
_REFUSAL_COLUMNS = (
    "at, principal, action, status, error, epoch, region, metric, cohort, release_id, failed"
)


def statements(p: str) -> dict[str, str]:
    """The store's statements with ``p`` as the parameter marker of its dialect."""
    return {
        "key": f"SELECT {_KEY_COLUMNS} FROM dpl_svc_keys WHERE key_id = {p}",
        "keys": f"SELECT {_KEY_COLUMNS} FROM dpl_svc_keys ORDER BY created_at, key_id",
        "insert_key": f"INSERT INTO dpl_svc_keys ({_KEY_COLUMNS}) VALUES ({', '.join([p] * 8)})",
        "revoke": f"UPDATE dpl_svc_keys SET revoked_at = {p} "
        f"WHERE key_id = {p} AND revoked_at IS NULL",
        "insert_refusal": f"INSERT INTO dpl_svc_refusals ({_REFUSAL_COLUMNS}) VALUES "
        f"({', '.join([p] * 11)}) RETURNING id",
        "prune": f"DELETE FROM dpl_svc_refusals WHERE id <= {p}",
        "refusals": f"SELECT {_REFUSAL_COLUMNS} FROM dpl_svc_refusals ORDER BY id DESC LIMIT {p}",
        "meta": f"SELECT value FROM dpl_svc_meta WHERE key = {p}",
        "set_meta": f"INSERT INTO dpl_svc_meta (key, value) VALUES ({p}, {p}) "
        "ON CONFLICT (key) DO NOTHING",
        "end_sessions": f"INSERT INTO dpl_svc_meta (key, value) VALUES ({p}, '1') "
        "ON CONFLICT (key) DO UPDATE "
        "SET value = CAST(CAST(dpl_svc_meta.value AS BIGINT) + 1 AS TEXT)",
    }
