"""Review 40 (diff 3): the PostgreSQL trigger check compared a guard's name, table,
``tgtype`` bits, function and body, but not its ``WHEN`` condition (``tgqual``) nor an
``UPDATE OF column`` list (``tgattr``). dpledger's own ``dpl_spend_no_decrease`` re-created
``… FOR EACH ROW WHEN (false) …`` or ``BEFORE UPDATE OF epoch OR DELETE …`` has the same
type bits, so it passed as dpledger's own while it never fires on a lowered total: a
hand-lowered total then went through (what 6b74b30's guard refuses at the UPDATE) and a
writer opened and released against it — the very "disabled" guard the check refuses when
it is disabled with ``ALTER TABLE … DISABLE TRIGGER``. The check now also reads
``tgqual``, ``tgattr`` and the trigger's arguments. Deterministic (a real PostgreSQL).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger.errors import LedgerCorrupted

pytestmark = pytest.mark.postgres

_GUARD = "EXECUTE FUNCTION dpl_spend_never_decreases()"
WHEN_FALSE = (
    "DROP TRIGGER dpl_spend_no_decrease ON dpl_spend",
    "CREATE TRIGGER dpl_spend_no_decrease BEFORE UPDATE OR DELETE ON dpl_spend "
    f"FOR EACH ROW WHEN (false) {_GUARD}",
)
UPDATE_OF = (
    "DROP TRIGGER dpl_spend_no_decrease ON dpl_spend",
    "CREATE TRIGGER dpl_spend_no_decrease BEFORE UPDATE OF epoch OR DELETE ON dpl_spend "
    f"FOR EACH ROW {_GUARD}",
)


@pytest.mark.parametrize("change", [WHEN_FALSE, UPDATE_OF], ids=["when-false", "update-of"])
def test_a_guard_that_never_fires_is_not_dpledgers_own(
    pg_server: Any, change: tuple[str, ...]
) -> None:
    url = pg_server.create_schema()
    policy = dl.Policy.load(str(SPATIAL))
    req = dl.ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="eu-west", cohort=3000)
    try:
        with dl.Ledger.open(url, policy, mode="create") as ledger:
            ledger.release(req, 900.0)
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in change:
                conn.execute(statement)
            conn.execute("UPDATE dpl_spend SET total = '0'")  # the guard did not fire
        with dl.Ledger.open(url, policy, mode="read") as ledger:
            report = ledger.verify()
            assert any("trigger" in p for p in report.problems), report.problems
        with (
            pytest.raises(LedgerCorrupted, match="trigger"),
            dl.Ledger.open(url, policy, mode="write") as ledger,
        ):
            ledger.release(req.model_copy(update={"epoch": 1}), 900.0)
    finally:
        pg_server.drop(url)
