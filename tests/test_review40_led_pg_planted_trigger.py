"""The PostgreSQL twin of ``test_review40_led_planted_trigger`` (review 40).

A ``BEFORE INSERT OR UPDATE ON dpl_spend … RETURN NULL`` trigger planted in a PostgreSQL
ledger's schema changes no row, so ``verify`` said ok, and every later release skipped its
spend update and was approved past its allocation (three once-per-epoch releases). Now a
trigger on the ledger's tables that dpledger did not create — or one of its own changed or
disabled — fails ``verify``, and no writer opens through it (nothing is written).

Diff 3: dpledger's own ``dpl_spend_no_decrease`` re-created ``… WHEN (false) …`` or
``BEFORE UPDATE OF epoch OR DELETE …`` kept its name, ``tgtype`` bits, function and body,
so it passed as dpledger's own while it never fired on a lowered total (a hand-lowered
total went through, and a writer opened against it): the check also reads ``tgqual`` and
``tgattr``.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger.errors import LedgerCorrupted

pytestmark = pytest.mark.postgres

PLANT = (
    "CREATE FUNCTION zz() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
    "CREATE TRIGGER zz BEFORE INSERT OR UPDATE ON dpl_spend FOR EACH ROW EXECUTE FUNCTION zz()",
)
DISABLE = ("ALTER TABLE dpl_spend DISABLE TRIGGER dpl_spend_no_decrease",)
REWRITE = (  # dpledger's own guard function, replaced by one that guards nothing
    "CREATE OR REPLACE FUNCTION dpl_spend_never_decreases() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
)

_GUARD = "EXECUTE FUNCTION dpl_spend_never_decreases()"
_LOWERED = "UPDATE dpl_spend SET total = '0'"  # goes through: the guard does not fire
WHEN_FALSE = (
    "DROP TRIGGER dpl_spend_no_decrease ON dpl_spend",
    "CREATE TRIGGER dpl_spend_no_decrease BEFORE UPDATE OR DELETE ON dpl_spend "
    f"FOR EACH ROW WHEN (false) {_GUARD}",
    _LOWERED,
)
UPDATE_OF = (
    "DROP TRIGGER dpl_spend_no_decrease ON dpl_spend",
    "CREATE TRIGGER dpl_spend_no_decrease BEFORE UPDATE OF epoch OR DELETE ON dpl_spend "
    f"FOR EACH ROW {_GUARD}",
    _LOWERED,
)


@pytest.mark.parametrize(
    "change",
    [PLANT, DISABLE, REWRITE, WHEN_FALSE, UPDATE_OF],
    ids=["plant", "disable", "rewrite", "when-false", "update-of"],
)
def test_a_planted_or_changed_postgres_trigger_fails_verify_and_stops_writers(
    pg_server: Any, change: tuple[str, ...]
) -> None:
    url = pg_server.create_schema()
    policy = dl.Policy.load(str(SPATIAL))
    req = dl.ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="eu-west", cohort=3000)
    try:
        with dl.Ledger.open(url, policy, mode="create") as ledger:
            ledger.release(req, 900.0)
            assert ledger.verify().ok  # dpledger's own triggers pass
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in change:
                conn.execute(statement)
        with dl.Ledger.open(url, policy, mode="read") as ledger:
            report = ledger.verify()
            assert not report.ok
            assert any("trigger" in p for p in report.problems)
            assert len(ledger) == 1
        with (
            pytest.raises(LedgerCorrupted, match="trigger"),
            dl.Ledger.open(url, policy, mode="write") as ledger,
        ):
            ledger.release(req.model_copy(update={"epoch": 1}), 900.0)
        with dl.Ledger.open(url, policy, mode="read") as ledger:
            assert len(ledger) == 1  # nothing was written
    finally:
        pg_server.drop(url)


def test_a_guard_enabled_always_is_still_dpledgers_own(pg_server: Any) -> None:
    """``ENABLE ALWAYS`` (a logical-replication setup's choice) keeps a guard firing: it is
    not "changed or disabled" (review 40, diff review)."""
    url = pg_server.create_schema()
    policy = dl.Policy.load(str(SPATIAL))
    try:
        with dl.Ledger.open(url, policy, mode="create") as ledger:
            ledger.init()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER TABLE dpl_spend ENABLE ALWAYS TRIGGER dpl_spend_no_decrease")
        with dl.Ledger.open(url, policy, mode="write") as ledger:
            assert ledger.verify().ok
    finally:
        pg_server.drop(url)
