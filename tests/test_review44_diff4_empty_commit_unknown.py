"""A partial round whose every request is refused writes nothing, yet still ends with a
COMMIT: when that COMMIT is not confirmed, bd7edd7 raises :class:`CommitUnknown` — "the
spend may have been recorded … check the ledger's entries" — for a transaction that
wrote no row, and the round's verdicts are lost (review 44 diff 4: a CommitUnknown where
nothing was recorded). The writer knows it staged nothing: a plain StoreError, "nothing
was recorded, retry". (One that found a request recorded under its release id, by a
concurrent twin, stays CommitUnknown: that release was recorded.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from factories import policy

import dpledger as dl
from dpledger.errors import CommitUnknown, StoreError
from dpledger.ledger.sqlite import SqliteStore


def test_an_unconfirmed_commit_of_a_round_that_wrote_nothing_is_not_commit_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    region = policy().regions.names[0]
    with dl.Ledger.open(str(tmp_path / "l.db"), policy(), mode="create") as ledger:
        ledger.init()
        big = dl.ReleaseRequest(epoch=0, metric="loss", region=region, cohort=5000)
        while True:  # spend the epoch's budget for this metric
            try:
                ledger.release(big, 1200.0)
            except dl.BudgetExceeded:
                break
        before = (tmp_path / "l.db").read_bytes(), len(ledger.entries())
        real = SqliteStore._execute

        def unconfirmed(self: SqliteStore, sql: str, *args: Any) -> Any:
            out = real(self, sql, *args)
            if sql == "COMMIT":
                raise StoreError(f"SQLite ledger {self.location}: disk I/O error")
            return out

        monkeypatch.setattr(SqliteStore, "_execute", unconfirmed)
        with pytest.raises(StoreError) as failed:
            ledger.release_round([(big, 1200.0)], partial=True)
        monkeypatch.undo()
        assert len(ledger.entries()) == before[1]  # nothing was written
        assert not isinstance(failed.value, CommitUnknown), str(failed.value)
        assert "nothing was recorded" in str(failed.value)
        assert (tmp_path / "l.db").read_bytes() == before[0]
        assert ledger.verify().ok
