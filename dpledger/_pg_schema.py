"""Which schema a PostgreSQL session finds dpledger's tables in: a writer's must be its own.

dpledger names its tables unqualified, so PostgreSQL resolves them through the session's
``search_path``. With ``search_path=team_b,public`` a ledger in ``public`` is found (and
``ledger init`` would adopt it) while a new one would be created in ``team_b``: two teams
would share one budget without noticing. A table is written only where new ones would be
created: the session's ``current_schema()``, the first schema of its path that exists —
by a writer; a reader reads what its search_path finds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from dpledger.errors import StoreError

__all__ = ["IN_TEMP", "creating", "denied", "found_sql", "in_own_schema", "in_temp", "moved"]

IN_TEMP = "SELECT 1 FROM pg_class WHERE oid = to_regclass('dpl_meta') AND relpersistence = 't'"
"""A row when the ledger's tables were just created as temporary tables (pg_temp first)."""


def found_sql(table: str) -> str:
    """The query: ``table``'s schema and the session's own, no row when it is not found."""
    if not table.isidentifier():  # a constant of dpledger's, never a caller's text
        raise ValueError(f"not a table name: {table!r}")
    return (
        "SELECT n.nspname, current_schema() FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        f"WHERE c.oid = to_regclass('{table}')"
    )


def in_own_schema(
    rows: Sequence[Sequence[Any]], what: str, location: str, *, writer: bool = True
) -> bool:
    """Whether :func:`found_sql`'s ``rows`` found the table; for a ``writer``,
    :class:`StoreError` when it lies in another schema than the one this session creates
    in (``what``: the ledger, the key store; ``location``: its URL without a password).

    A reader (nothing written, nothing spent) reads what its search_path finds, as any
    PostgreSQL client does: an auditor role with a schema of its own name (PostgreSQL's
    per-user pattern, ``"$user", public``) reads a ledger in ``public``."""
    if not rows:
        return False
    found, own = rows[0][0], rows[0][1]
    if found != own and writer:
        where = "no schema of its own" if own is None else f"its own schema is {own!r}"
        raise StoreError(
            f"the {what} at {location} was found in schema {found!r} through the session's "
            f"search_path, but {where} (the first schema of its search_path, where dpledger "
            f"creates tables): set search_path to the {what}'s one schema "
            "(?options=-c%20search_path%3DNAME in the URL) or keep it in a database of its own"
        )
    return True


def in_temp(location: str) -> StoreError:
    """Why a ledger is not created in the session's temporary schema (review 41)."""
    return StoreError(
        f"{location}: the session's search_path creates tables in its temporary schema "
        "(pg_temp), which vanish when the session ends: each run would spend from a fresh "
        "budget; name the ledger's schema first (?options=-c%20search_path%3DNAME); nothing "
        "was created"
    )


def denied(e: StoreError) -> str | None:
    """PostgreSQL's own words when ``e`` is a privilege it refused (SQLSTATE 42501), else
    None: the store's advice for that case names the ledger's tables, which is wrong for
    DDL (create, migrate) and the catalogs (a reader's trigger check)."""
    cause = e.__cause__
    if getattr(cause, "sqlstate", None) != "42501":
        return None
    said = getattr(getattr(cause, "diag", None), "message_primary", None)
    return str(said) if said else "permission denied"


@contextmanager
def creating(location: str) -> Iterator[None]:
    """Creating the ledger at ``location``: a privilege PostgreSQL refused (SQLSTATE 42501)
    is told as what creating needs. ``create`` replaces a guard function of dpledger's name
    left in the schema with another body (review 42 diff 2), which needs that function's
    owner: the store's error said "GRANT a writer SELECT, INSERT and UPDATE" on tables not
    created yet, after the function's whole DDL (review 42 diff 3)."""
    try:
        yield
    except StoreError as e:
        if (said := denied(e)) is None:
            raise
        raise StoreError(
            f"{location}: {said}: creating a ledger creates its tables, "
            "indexes and dpledger's trigger functions in the first schema of the session's "
            "search_path, which PostgreSQL lets a role do only with CREATE on that schema, and "
            "only as their owner where they exist already: if another role created the ledger "
            "meanwhile, open it again; a function of dpledger's name with another body left "
            "there must be dropped by its owner (or create the ledger in another schema); "
            "nothing was created"
        ) from e.__cause__


def moved(was: Sequence[Sequence[Any]], now: Sequence[Sequence[Any]], location: str) -> StoreError:
    """Why a new session that finds the ledger's tables elsewhere, or nowhere
    (:func:`found_sql`'s rows then and now), is not used (review 41)."""
    if not now:  # the URL may name the schema: then its search_path cannot have changed
        return StoreError(
            f"a new session on {location} finds no ledger (no dpl_meta table) through its "
            f"search_path, where this handle opened it in schema {was[0][0]!r}: the ledger "
            "was dropped, or the session's search_path changed; nothing was recorded; do not "
            "create a new one in its place (a fresh budget): find the ledger, or restore it "
            "from a backup"
        )
    return StoreError(
        f"a new session on {location} finds the ledger's tables in schema {now[0][0]!r}, not "
        f"in schema {was[0][0]!r} where this handle opened the ledger (its search_path "
        "changed): nothing was recorded; open the ledger again"
    )
