"""Review 39 (diff): a ledger in ``public`` read by a role with its own schema.

PostgreSQL's documented "secure schema usage pattern" (docs §5.9.6) gives each user a
schema named after it, so the default ``search_path`` ("$user", public) makes that
schema the session's ``current_schema()``; shared tables live in ``public``. A ledger an
operator made in ``public`` (no schema of the operator's name) used to open for such a
role: after f31a164 every open, a plain read (``verify``/``status``) included, was a
StoreError, so a deployment that worked stopped at its next start. A reader now reads what
its search_path finds; a writer must still name the ledger's schema (its refusal says how).
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from factories import SPATIAL

import dpledger as dl

pytestmark = pytest.mark.postgres


def test_a_public_ledger_reads_for_a_role_with_its_own_schema(pg_server: Any) -> None:
    url = pg_server.create_database()  # default search_path "$user", public
    policy = dl.Policy.load(str(SPATIAL))
    with dl.Ledger.open(url, policy, mode="create") as ledger:
        ledger.init()  # the admin role has no schema of its name: made in public
    role = f"r_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'CREATE SCHEMA "{role}" AUTHORIZATION "{role}"')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
    mine = url.replace(f"//{pg_server.user}@", f"//{role}@")
    try:
        with dl.Ledger.open(mine, policy, mode="read") as ledger:
            assert ledger.exists
            assert len(ledger) == 0
        with pytest.raises(dl.StoreError, match=r"found in schema 'public'.*search_path"):
            dl.Ledger.open(mine, policy, mode="write")
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{role}" CASCADE')
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')
