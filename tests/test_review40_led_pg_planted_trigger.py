"""The PostgreSQL twin of ``test_review40_led_planted_trigger`` (review 40), not fixed.

A ``BEFORE INSERT OR UPDATE ON dpl_spend … RETURN NULL`` trigger planted in a PostgreSQL
ledger's schema changes no row, so ``verify`` says ok; every later release skips its
spend update and is approved past its allocation (three once-per-epoch releases).
The SQLite store now refuses such a trigger (verify fails, no writer opens); the
PostgreSQL store needs the same in ``ledger/postgres.py`` (compare ``pg_trigger`` of
the ledger's tables, and the bodies of the trigger functions, against its own DDL),
outside this review's modules: strict xfail until then.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from factories import SPATIAL

import dpledger as dl

pytestmark = pytest.mark.postgres


@pytest.mark.xfail(strict=True, reason="PostgreSQL store does not check for foreign triggers")
def test_a_planted_postgres_trigger_fails_verify(pg_server: Any) -> None:
    url = pg_server.create_schema()
    policy = dl.Policy.load(str(SPATIAL))
    try:
        with dl.Ledger.open(url, policy, mode="create") as ledger:
            ledger.init()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION zz() RETURNS trigger LANGUAGE plpgsql "
                "AS $$ BEGIN RETURN NULL; END $$"
            )
            conn.execute(
                "CREATE TRIGGER zz BEFORE INSERT OR UPDATE ON dpl_spend "
                "FOR EACH ROW EXECUTE FUNCTION zz()"
            )
        with dl.Ledger.open(url, policy, mode="read") as ledger:
            assert not ledger.verify().ok
    finally:
        pg_server.drop(url)
