"""The PostgreSQL store's SQL: its dialect of the shared statements, and its own DDL.

``%s`` parameters and arrays for lists (psycopg); the write path's pipelined statements
use ``$n`` (:mod:`~dpledger.ledger.pgwrite`). Kept apart from the store's logic
(:mod:`~dpledger.ledger.postgres`) so that each stays readable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from dpledger._pg_schema import denied
from dpledger.errors import DpLedgerError, LedgerCorrupted, StoreError
from dpledger.ledger.schema import (
    COLUMNS,
    EPOCH_INDEX,
    PARAMETERLESS,
    SCHEMA_1_COLUMNS,
    SPEND_TABLE,
    Schema1,
    Statements,
    later_schema,
)

__all__ = [
    "ADVICE",
    "APPEND_ONLY",
    "EPOCH_POLICIES",
    "OWN_TRIGGERS",
    "RELEASES",
    "RESTORE",
    "SCHEMA_1",
    "SCHEMA_3_UPGRADE",
    "SPEND_GUARD",
    "SQL",
    "TRIGGERS",
    "foreign_triggers",
    "trigger_refusal",
    "triggers_read",
]

SQL = Statements(
    epoch_policy="SELECT policy_hash, policy_version FROM dpl_entries WHERE epoch = %s AND seq > 0 "
    "ORDER BY seq LIMIT 1",
    releases=f"SELECT {COLUMNS} FROM dpl_entries WHERE release_id = ANY(%s::text[])",
    policy_hashes="SELECT hash FROM dpl_policies WHERE version = %s",
    insert_policy="INSERT INTO dpl_policies (hash, name, version, body) VALUES (%s, %s, %s, %s)",
    state="SELECT NULL::bigint, key, NULL, value FROM dpl_meta "
    "WHERE key IN ('head_seq', 'head_hash') "
    "UNION ALL SELECT epoch, scope, metric, total FROM dpl_spend "
    "WHERE epoch = ANY(%s::bigint[]) "
    "UNION ALL SELECT NULL::bigint, 'last_entry', seq::text, hash FROM "
    "(SELECT seq, hash FROM dpl_entries ORDER BY seq DESC LIMIT 1) AS last_entry",
    spend="SELECT scope, metric, total FROM dpl_spend WHERE epoch = %s",
    policy_body="SELECT body FROM dpl_policies WHERE hash = %s",
    set_meta="INSERT INTO dpl_meta (key, value) VALUES (%s, %s) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    entries=f"SELECT {COLUMNS} FROM dpl_entries WHERE seq > %s "
    "AND (%s::bigint IS NULL OR epoch = %s) AND (%s::text IS NULL OR scope = %s) "
    "AND (%s::text IS NULL OR metric = %s) ORDER BY seq LIMIT %s",
    missing_guards="SELECT own.tg FROM unnest(ARRAY['dpl_entries_no_change', "
    "'dpl_entries_no_truncate', 'dpl_spend_no_decrease', 'dpl_spend_no_truncate']) AS own(tg) "
    "WHERE NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgname = own.tg AND NOT "
    "t.tgisinternal AND t.tgrelid IN (to_regclass('dpl_entries'), to_regclass('dpl_spend'))) "
    "ORDER BY own.tg",
    **PARAMETERLESS,
)
"""The store's statements, in PostgreSQL's dialect (``%s`` parameters, arrays for lists)."""

ADVICE = {
    "25006": "the session is read-only (a hot standby, or default_transaction_read_only set "
    "for the role or database): point the URL at the primary, with a role that may write",
    "42501": "the role lacks a privilege on the ledger's tables dpl_meta, dpl_entries, "
    "dpl_spend and dpl_policies: GRANT a writer SELECT, INSERT and UPDATE on them (a "
    "reader SELECT), or use the ledger's own roles",
}
"""What to do about a refusal a retry would meet again (by SQLSTATE; review 41)."""

RELEASES = SQL.releases.replace("%s", "$1")
"""(release ids as one text-format ``text[]``) -> their entries' rows, in a pipeline."""

EPOCH_POLICIES = (
    "SELECT DISTINCT ON (epoch) epoch, policy_hash, policy_version FROM dpl_entries "
    "WHERE epoch = ANY($1::bigint[]) AND seq > 0 ORDER BY epoch, seq"
)
"""(epochs as one text-format ``bigint[]``) -> each epoch's policy binding (its first
entry's policy), for epochs that have entries; in a pipeline."""

SCHEMA_1 = Schema1(
    entries=f"SELECT {SCHEMA_1_COLUMNS} FROM dpl_entries WHERE seq > %s ORDER BY seq LIMIT %s",
    spend="SELECT epoch, scope, total FROM dpl_spend ORDER BY epoch, scope",
    upgrade=(
        "ALTER TABLE dpl_entries ADD COLUMN release_id TEXT UNIQUE, "
        "ADD COLUMN request_hash TEXT, ADD COLUMN principal TEXT",
        "ALTER TABLE dpl_policies ADD COLUMN name TEXT NOT NULL DEFAULT ''",
        "UPDATE dpl_policies SET name = body::json->>'name'",
        "DROP TABLE dpl_spend",
        SPEND_TABLE,
    ),
    insert_spend="INSERT INTO dpl_spend (epoch, scope, metric, total) VALUES (%s, %s, %s, %s)",
)
"""How this store reads and upgrades a schema-1 ledger (PostgreSQL's DDL is transactional)."""

SCHEMA_3_UPGRADE = (
    # the unique constraint on entries.hash, whatever it was named when it was created
    """DO $dpl$
    DECLARE name text;
    BEGIN
        FOR name IN SELECT c.conname FROM pg_constraint c
                JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attname = 'hash'
                WHERE c.conrelid = 'dpl_entries'::regclass AND c.contype = 'u'
                AND c.conkey = ARRAY[a.attnum] LOOP
            EXECUTE format('ALTER TABLE dpl_entries DROP CONSTRAINT %I', name);
        END LOOP;
    END
    $dpl$""",
    "DROP INDEX IF EXISTS dpl_entries_epoch",
    EPOCH_INDEX,
)
"""Schema 2 to 3: no unique index on entries' hashes, the epoch index ordered by seq."""

APPEND_ONLY = """
DO $dpl$
BEGIN
    IF to_regprocedure('dpl_entries_append_only()') IS NULL THEN
        CREATE FUNCTION dpl_entries_append_only() RETURNS trigger
        LANGUAGE plpgsql AS $fn$
        BEGIN
            RAISE EXCEPTION 'dpledger entries are append-only: % refused', TG_OP;
        END
        $fn$;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'dpl_entries'::regclass
                   AND tgname = 'dpl_entries_no_change') THEN
        CREATE TRIGGER dpl_entries_no_change BEFORE UPDATE OR DELETE ON dpl_entries
            FOR EACH ROW EXECUTE FUNCTION dpl_entries_append_only();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'dpl_entries'::regclass
                   AND tgname = 'dpl_entries_no_truncate') THEN
        CREATE TRIGGER dpl_entries_no_truncate BEFORE TRUNCATE ON dpl_entries
            FOR EACH STATEMENT EXECUTE FUNCTION dpl_entries_append_only();
    END IF;
END
$dpl$
"""
"""The append-only guards on ``dpl_entries``: a row trigger refusing ``UPDATE`` and
``DELETE``, a statement trigger refusing ``TRUNCATE`` (created once, idempotently)."""

SPEND_GUARD = """
DO $dpl$
BEGIN
    IF to_regprocedure('dpl_spend_never_decreases()') IS NULL THEN
        CREATE FUNCTION dpl_spend_never_decreases() RETURNS trigger
        LANGUAGE plpgsql AS $fn$
        DECLARE amount CONSTANT text := '^(0|[1-9][0-9]*)(/[1-9][0-9]*)?$';
        BEGIN
            IF TG_OP <> 'UPDATE' THEN
                RAISE EXCEPTION 'dpledger spend totals are never deleted: % refused', TG_OP;
            END IF;
            IF NEW.epoch IS DISTINCT FROM OLD.epoch OR NEW.scope IS DISTINCT FROM OLD.scope
                    OR NEW.metric IS DISTINCT FROM OLD.metric OR NEW.total !~ amount
                    OR OLD.total !~ amount
                    OR split_part(NEW.total, '/', 1)::numeric
                       * coalesce(nullif(split_part(OLD.total, '/', 2), ''), '1')::numeric
                     < split_part(OLD.total, '/', 1)::numeric
                       * coalesce(nullif(split_part(NEW.total, '/', 2), ''), '1')::numeric THEN
                RAISE EXCEPTION 'dpledger spend totals never decrease nor move: % refused',
                    format('%s of epoch %s scope %L metric %L', TG_OP, OLD.epoch, OLD.scope,
                           OLD.metric);
            END IF;
            RETURN NEW;
        END
        $fn$;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'dpl_spend'::regclass
                   AND tgname = 'dpl_spend_no_decrease') THEN
        CREATE TRIGGER dpl_spend_no_decrease BEFORE UPDATE OR DELETE ON dpl_spend
            FOR EACH ROW EXECUTE FUNCTION dpl_spend_never_decreases();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'dpl_spend'::regclass
                   AND tgname = 'dpl_spend_no_truncate') THEN
        CREATE TRIGGER dpl_spend_no_truncate BEFORE TRUNCATE ON dpl_spend
            FOR EACH STATEMENT EXECUTE FUNCTION dpl_spend_never_decreases();
    END IF;
END
$dpl$
"""
"""Schema 4: the database refuses to lower, move, delete or truncate a spend total. The
totals are exact fractions as text (``p`` or ``p/q``), compared exactly as cross-multiplied
``numeric`` integers (text comparison would be wrong); any other form is refused."""


def _body(ddl: str) -> str:
    """The function body (between ``$fn$`` quotes) of a guard's DDL, whitespace collapsed."""
    return " ".join(ddl.split("$fn$")[1].split())


def _replacing(ddl: str, function: str, table: str) -> str:
    """``ddl`` re-creating dpledger's ``function`` when it is missing or was left with
    another body (whitespace aside, as :func:`foreign_triggers` compares it); an intact
    one is kept (replacing it needs its owner). No backslash in the pattern: ``'\\s+'`` read
    ``'s+'`` under ``standard_conforming_strings = off``. One found in another schema further
    down the search_path is not the ledger's: its own is created in the ledger's schema
    (the session's first), else the triggers ran whatever that schema's owner made of it
    (review 42 diff 2). One another role owns is not kept either (review 42 diff 3: that
    role may replace it at will): replacing it needs its owner, so a creator or a migration
    that is not its owner is refused, saying to have it dropped."""
    kept = f"IF to_regprocedure('{function}()') IS NULL THEN\n        CREATE FUNCTION"
    if ddl.count(kept) != 1:
        raise RuntimeError(f"the DDL of {function} changed: {_replacing.__name__} needs it")
    found = f"FROM pg_proc WHERE oid = to_regprocedure('{function}()')"
    differs = (
        f"IF to_regprocedure('{function}()') IS NULL OR (SELECT btrim(regexp_replace(prosrc, "
        f"'[[:space:]]+', ' ', 'g')) {found}) IS DISTINCT FROM $body${_body(ddl)}$body$ "
        f"OR (SELECT pronamespace {found}) IS DISTINCT FROM (SELECT oid FROM pg_namespace "
        f"WHERE nspname = current_schema()) OR (SELECT proowner {found}) IS DISTINCT FROM "
        f"(SELECT relowner FROM pg_class WHERE oid = '{table}'::regclass) THEN\n"
        "        CREATE OR REPLACE FUNCTION"
    )
    return ddl.replace(kept, differs)


RESTORE = (
    _replacing(APPEND_ONLY, "dpl_entries_append_only", "dpl_entries"),
    _replacing(SPEND_GUARD, "dpl_spend_never_decreases", "dpl_spend"),
)
"""dpledger's own triggers created where missing, their functions re-created where they
differ from dpledger's (``ledger migrate``, and ``create``: review 42): a function left
with another body while its triggers were dropped is reported by nothing, and kept, it
made every re-created trigger foreign, so writers refused the ledger migrate had just
repaired (and a new ledger's creator released through a guard that guarded nothing)."""


_ROW, _BEFORE, _DELETE, _UPDATE, _TRUNCATE = 1, 2, 8, 16, 32  # pg_trigger.tgtype bits
OWN_TRIGGERS: dict[str, tuple[str, int, str, str]] = {
    "dpl_entries_no_change": ("dpl_entries", _ROW | _BEFORE | _DELETE | _UPDATE,
                              "dpl_entries_append_only", _body(APPEND_ONLY)),
    "dpl_entries_no_truncate": ("dpl_entries", _BEFORE | _TRUNCATE,
                                "dpl_entries_append_only", _body(APPEND_ONLY)),
    "dpl_spend_no_decrease": ("dpl_spend", _ROW | _BEFORE | _DELETE | _UPDATE,
                              "dpl_spend_never_decreases", _body(SPEND_GUARD)),
    "dpl_spend_no_truncate": ("dpl_spend", _BEFORE | _TRUNCATE,
                              "dpl_spend_never_decreases", _body(SPEND_GUARD)),
}  # fmt: skip
"""dpledger's triggers as it creates them: name → (table, ``tgtype``, function, body)."""

TRIGGERS = """
SELECT t.tgname, c.relname, t.tgtype, t.tgenabled, p.proname, p.prosrc,
       t.tgqual IS NULL AND cardinality(t.tgattr::int2[]) = 0
       AND p.pronamespace = c.relnamespace AND p.proowner = c.relowner
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_proc p ON p.oid = t.tgfoid
WHERE NOT t.tgisinternal AND t.tgrelid IN (
    SELECT to_regclass(name) FROM unnest(ARRAY['dpl_meta', 'dpl_entries', 'dpl_spend',
                                              'dpl_policies']) AS name)
ORDER BY t.tgname
"""
"""Every user trigger on the ledger's tables (as its unqualified names resolve), and
whether it fires on every row its events touch (no ``WHEN`` condition, no ``UPDATE OF``
column list: either made dpledger's own guard skip a lowered total; review 40 diff 3) and
runs a function of the table's own schema and owner (another schema's owner, or another
role, could change it at will: review 42 diff 3, as ``RESTORE`` never reuses one)."""


def foreign_triggers(rows: list[tuple[object, ...]]) -> list[str]:
    """Problems with the :data:`TRIGGERS` rows: a trigger dpledger did not create, or one
    of its own changed (table, timing, events, a condition or column list, function, body)
    or disabled (``A``, enabled always, is still enabled). A planted
    ``BEFORE … ON dpl_spend … RETURN NULL`` skipped every spend update, so later releases
    were approved past the budget while every row still verified (review 40: the SQLite
    store's twin)."""
    odd = []
    for name, table, kind, enabled, function, body, plain in rows:
        got = (str(table), int(str(kind)), str(function), " ".join(str(body).split()))
        if OWN_TRIGGERS.get(str(name)) != got or str(enabled) not in ("O", "A") or not plain:
            odd.append(str(name))
    if not odd:
        return []
    return [
        f"the ledger's tables have trigger(s) {', '.join(odd)} that dpledger did not create "
        "(or that were changed, disabled or bound to another schema's or owner's function): "
        "they run in "
        "every write and can skip or alter what a release records; drop them (`dpledger "
        "ledger migrate` re-creates dpledger's own)"
    ]


def triggers_read(execute: Callable[[str], list[tuple[Any, ...]]], location: str) -> list[str]:
    """:func:`foreign_triggers` of the :data:`TRIGGERS` rows ``execute`` reads (the store's).
    A role PostgreSQL does not let read its catalogs (``pg_proc`` revoked from PUBLIC on a
    hardened server) got the advice for the ledger's tables, which it could read: a
    reader's dry run reads them since review 42 diff 2 (review 42 diff 3)."""
    try:
        return foreign_triggers(execute(TRIGGERS))
    except StoreError as e:
        if (said := denied(e)) is None:
            raise
        raise StoreError(
            f"PostgreSQL ledger {location}: {said}: the role cannot read "
            "PostgreSQL's catalogs pg_trigger, pg_class and pg_proc, where the ledger's "
            "triggers are checked as a release would check them (PostgreSQL lets every role "
            "read them unless revoked): GRANT the role SELECT on them, or use a role that may"
        ) from e.__cause__


def trigger_refusal(conn: Any, location: str) -> DpLedgerError | None:
    """Why a writer must not use the ledger on ``conn`` (a psycopg connection) for its
    triggers (:func:`foreign_triggers`), or None: nothing is written through them. A later
    schema's triggers are its own: that says "upgrade dpledger", not "drop them" (review 41)."""
    found = foreign_triggers(conn.execute(TRIGGERS).fetchall())
    if not found:
        return None
    later = None
    with contextlib.suppress(Exception):  # the refusal below stands whatever this read meets
        rows = conn.execute("SELECT value FROM dpl_meta WHERE key = 'schema_version'").fetchall()
        later = later_schema(location, rows[0][0] if rows else None)
    return later or LedgerCorrupted(f"{location}: {found[0]}; nothing was written")
