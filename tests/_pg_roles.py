"""Login roles (not superusers) for the PostgreSQL privilege tests, dropped afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlsplit

import psycopg

__all__ = ["as_role", "login_roles", "schema_of"]


def schema_of(url: str) -> str:
    """The schema a test URL's ``search_path`` option names (see ``pg_url``)."""
    return dict(parse_qsl(urlsplit(url).query))["options"].split("=", 1)[1]


def as_role(url: str, role: str) -> str:
    """``url`` connecting as ``role`` instead of the suite's superuser."""
    return url.replace("postgres@", f"{role}@", 1)


@contextmanager
def login_roles(pg_url: str, count: int, *, create: bool = True) -> Iterator[tuple[str, ...]]:
    """``count`` new login roles with USAGE (and, with ``create``, CREATE) on the URL's
    schema; everything they own, and they, dropped afterwards."""
    names = tuple(f"r_{uuid.uuid4().hex[:12]}" for _ in range(count))
    grant = "USAGE, CREATE" if create else "USAGE"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        for name in names:
            admin.execute(f'CREATE ROLE "{name}" LOGIN')
            admin.execute(f'GRANT {grant} ON SCHEMA "{schema_of(pg_url)}" TO "{name}"')
    try:
        yield names
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            for name in names:
                admin.execute(f'DROP OWNED BY "{name}"')
                admin.execute(f'DROP ROLE "{name}"')
