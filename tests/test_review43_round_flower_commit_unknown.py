"""Review 43 (round): a Flower round whose COMMIT succeeded but was not seen to succeed
lost its values for good.

The ledger raises ``StoreError`` ("COMMIT failed, its outcome is unknown ... a retry under
the same release_id returns a recorded release") when a COMMIT's acknowledgement is lost:
a PostgreSQL session that dies in the commit round trip, an SQLite COMMIT that reports an
error. ``LedgerEvaluation`` caught it as "nothing released ... rolled back (nothing
charged)", reported every (region, metric) of the round as not released, and had already
marked the round's release ids as used, so no retry could ever fetch them: the ε was spent
(the entries are in the ledger) and the values never reached the round's record. The
wrapper holds the ids, so it can ask again: the same round under the same ids returns the
recorded releases (nothing charged twice), or, if the commit did not land, commits it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_flower import METRICS, exact, make_client, run  # skips without the flower extra

from dpledger import Ledger
from dpledger.errors import StoreError
from dpledger.ledger.sqlite import SqliteStore
from dpledger.sim.fleet import make_fleet


def test_a_round_whose_commit_was_not_seen_keeps_its_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = make_fleet(n_clients=40, regions=("north", "south"), n_classes=3,
                       scenarios=("label_skew",), seed=1)  # fmt: skip
    real = SqliteStore._execute
    lost: list[str] = []

    def commit_unacknowledged(self: SqliteStore, sql: str, *args: Any) -> Any:
        out = real(self, sql, *args)
        if sql == "COMMIT" and not lost:  # the first round's commit lands, its answer is lost
            lost.append(sql)
            raise StoreError(f"SQLite ledger {self.location}: disk I/O error")
        return out

    with Ledger.open(tmp_path / "flower.db", exact(), mode="create") as ledger:
        ledger.init()
        monkeypatch.setattr(SqliteStore, "_execute", commit_unacknowledged)
        strategy, result, _ = run(fleet, ledger, rounds=1, client=make_client(fleet, bad=False))
        monkeypatch.setattr(SqliteStore, "_execute", real)
        assert lost == ["COMMIT"]
        entries = ledger.entries()
        report = strategy.rounds[1]
        assert len(entries) == 2 * len(METRICS)  # the round's ε is spent
        assert len(report.releases) == len(entries)  # ... and its values reached the record
        assert sorted(r.entry_id for r in report.releases) == [e.seq for e in entries]
        assert all(r.retried for r in report.releases)
        assert result.evaluate_metrics_clientapp[1]["released"] == len(entries)
        assert ledger.verify().ok


@pytest.mark.parametrize("times", [1, 2])
def test_a_round_whose_store_failed_before_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, times: int
) -> None:
    """A StoreError before the COMMIT (nothing recorded): once, the round is asked again and
    commits once (charged once); twice, nothing is released, nothing recorded."""
    fleet = make_fleet(n_clients=40, regions=("north", "south"), n_classes=3,
                       scenarios=("label_skew",), seed=1)  # fmt: skip
    real = SqliteStore._write_rows
    failed: list[int] = []

    def refused(self: SqliteStore, *args: Any) -> None:
        if len(failed) < times:
            failed.append(1)
            raise StoreError(f"SQLite ledger {self.location}: database or disk is full")
        real(self, *args)

    with Ledger.open(tmp_path / "flower.db", exact(), mode="create") as ledger:
        ledger.init()
        monkeypatch.setattr(SqliteStore, "_write_rows", refused)
        strategy, result, _ = run(fleet, ledger, rounds=1, client=make_client(fleet, bad=False))
        report = strategy.rounds[1]
        released = 2 * len(METRICS) if times == 1 else 0
        assert len(ledger) == len(report.releases) == released
        assert not any(r.retried for r in report.releases)
        assert result.evaluate_metrics_clientapp[1]["released"] == released
        assert ledger.verify().ok
