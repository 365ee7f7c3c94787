"""The Ledger facade on SQLite: releases, scopes, parallel releases, audit trail, threads.

Store-independent guarantees (races across processes, crashes, tampering) live in
``test_store_contract.py``, run against every store.
"""

from __future__ import annotations

import math
import threading
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from factories import drop_spend_guard, policy, restore_guards, spatial

from dpledger import (
    ALL,
    BudgetExceeded,
    InvalidInput,
    Ledger,
    PolicyMismatch,
    ReleaseRequest,
)
from dpledger.ledger.records import GENESIS
from dpledger.types import Budget

EDGES = {"hist5": "h5/v1", "hist20": "h20/v1"}


def req(metric: str, region: str = "north", epoch: int = 0, cohort: int = 100) -> ReleaseRequest:
    return ReleaseRequest(
        epoch=epoch, metric=metric, region=region, cohort=cohort, edges_version=EDGES.get(metric)
    )


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger.open(tmp_path / "l.db", policy(), mode="create")


def test_scalar_release_publishes_the_mean_with_its_ci95_bar(ledger: Ledger) -> None:
    r = ledger.release(req("loss"), 150.0)
    assert isinstance(r.value, float)
    assert r.value == float((r.noisy_sum / 100)[0])  # exactly the noisy sum / n
    with pytest.raises(ValueError, match="read-only"):
        r.noisy_sum[0] = 0.0
    assert r.scale == pytest.approx(2 / 0.1)
    assert r.error_bar == pytest.approx(math.log(20) * r.scale / 100)
    assert (r.charge, r.unit, r.entry_id, r.bar) == (
        Budget(Fraction(1, 10), "epsilon"),
        "epsilon",
        1,
        "ci95",
    )
    lo, hi = r.interval
    assert lo < r.value < hi


def test_vector_release_is_read_only_and_recorded_verbatim(ledger: Ledger) -> None:
    r = ledger.release(req("hist5"), [10.0, 20, 30, 40, 50])
    assert isinstance(r.value, np.ndarray)
    assert r.value.shape == (5,)
    with pytest.raises(ValueError, match="read-only"):
        r.value[0] = 0.0
    (entry,) = ledger.entries()
    assert entry.draft.output == tuple(r.value.tolist())
    assert entry.as_dict()["charge"] == "1/2"
    assert entry.draft.edges_version == "h5/v1"
    assert entry.draft.policy_hash == ledger.policy.content_hash


def test_scopes_compose_sequentially_within_and_in_parallel_across_regions(ledger: Ledger) -> None:
    ledger.release(req("loss"), 1.0)
    ledger.release(req("loss_b"), 1.0)
    ledger.release(req("loss", region="south"), 1.0)
    assert ledger.spent(0, "north").amount == Fraction(1, 10) + Fraction(1, 4)
    assert ledger.spent(0, "south").amount == Fraction(1, 10)
    assert ledger.spent(0, "east").amount == 0
    ledger.release(req("hist5", region=ALL), [0.0] * 5)
    assert ledger.spent(0, "east").amount == Fraction(1, 2)
    assert ledger.spent(0, "north").amount == Fraction(17, 20)
    assert ledger.spent(0, ALL).amount == Fraction(17, 20)  # the worst region
    assert ledger.remaining(0, "north").amount == Fraction(3, 20)
    assert ledger.spent(1, "north").amount == 0


def test_parallel_release_charges_each_region_and_is_all_or_nothing(ledger: Ledger) -> None:
    regions = ("north", "south", "east")
    rels = ledger.release_parallel({r: (req("hist5", region=r), [1.0] * 5) for r in regions})
    assert [r.request.region for r in rels] == list(regions)
    assert all(ledger.spent(0, r).amount == Fraction(1, 2) for r in regions)
    ledger.release(req("loss_b", region="east"), 1.0)
    ledger.release(req("loss_b", region="east"), 1.0)  # east is now full
    before = (len(ledger), ledger.head())
    with pytest.raises(BudgetExceeded) as info:
        ledger.release_parallel({r: (req("hist5", region=r), [1.0] * 5) for r in regions})
    assert "east" in info.value.scope
    assert (len(ledger), ledger.head()) == before
    assert ledger.spent(0, "north").amount == Fraction(1, 2)


def test_parallel_release_needs_distinct_regions(ledger: Ledger) -> None:
    with pytest.raises(InvalidInput, match="distinct regions"):
        ledger.release_parallel(
            {ALL: (req("loss", region=ALL), 1.0), "north": (req("loss", region="north"), 1.0)}
        )


def test_check_spends_nothing_and_agrees_with_release(ledger: Ledger) -> None:
    for _ in range(3):
        assert ledger.check(req("hist5"), [1.0] * 5).approved
    assert len(ledger) == 0
    assert ledger.spent(0, "north").amount == 0
    ledger.release(req("hist5"), [1.0] * 5)
    ledger.release(req("hist5"), [1.0] * 5)
    v = ledger.check(req("hist5"), [1.0] * 5)
    assert not v.approved
    assert v.failures[0].name == "budget"


def test_lifetime_sums_every_epoch_for_a_client(ledger: Ledger) -> None:
    for epoch in range(3):
        ledger.release(req("loss", epoch=epoch), 1.0)
    ledger.release(req("loss_b", region="south", epoch=1), 1.0)
    assert ledger.lifetime("north").epsilon_basic == Fraction(3, 10)
    assert ledger.lifetime("south").epsilon_basic == Fraction(1, 4)
    # the worst device may move: epoch 1's worst region is south (1/4 > 1/10)
    assert ledger.lifetime(ALL).epsilon_basic == Fraction(1, 10) + Fraction(1, 4) + Fraction(1, 10)


def test_entries_filter_and_verify_passes_on_an_honest_ledger(ledger: Ledger) -> None:
    ledger.release(req("loss"), 1.0)
    ledger.release(req("loss", region="south", epoch=2), 1.0)
    assert [e.entry_id for e in ledger.entries(region="south")] == [2]
    assert [e.entry_id for e in ledger.entries(epoch=0)] == [1]
    report = ledger.verify()
    assert report.ok
    assert report.entries_checked == 2


def test_ledger_refuses_another_policys_name(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db", policy(), mode="create") as ledger:
        ledger.init()
    with pytest.raises(PolicyMismatch, match="test-policy"):
        Ledger.open(tmp_path / "l.db", spatial())


def test_a_new_policy_version_keeps_the_spend_and_starts_at_a_new_epoch(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db", policy(), mode="create") as a:
        a.release(req("loss"), 1.0)
    # a bigger budget (a new version) must not reopen epoch 0
    v2 = policy(scalar_eps="0.2", epoch_epsilon="40", version="2")
    with Ledger.open(tmp_path / "l.db", v2) as b:
        assert b.spent(0, "north").amount == Fraction(1, 10)
        with pytest.raises(PolicyMismatch) as info:
            b.release(req("loss"), 1.0)
        assert info.value.verdict.failures[0].name == "epoch_policy"
        assert b.spent(0, "north").amount == Fraction(1, 10)
        b.release(req("loss", epoch=1), 1.0)
        assert b.spent(1, "north").amount == Fraction(1, 5)
        assert b.lifetime("north").epsilon_basic == Fraction(3, 10)
        report = b.verify()
        assert report.ok, report.problems


def test_verify_checks_each_epoch_against_the_policy_it_was_opened_under(tmp_path: Path) -> None:
    import sqlite3

    with Ledger.open(tmp_path / "l.db", policy(), mode="create") as a:
        for _ in range(10):
            a.release(req("loss"), 1.0)  # epoch 0 full under v1 (ε_eval = 1)
    con = sqlite3.connect(tmp_path / "l.db")  # an editor re-labels epoch 0 as v2's
    v2 = policy(epoch_epsilon="40", version="2")
    con.execute("DROP TRIGGER dpl_entries_no_update")
    con.execute("UPDATE dpl_entries SET policy_hash = ? WHERE seq = 5", (v2.content_hash,))
    restore_guards(con)  # a writer refuses a ledger without them
    con.commit()
    con.close()
    with Ledger.open(tmp_path / "l.db", v2) as b:
        problems = " ".join(b.verify().problems)
    assert "entry 5" in problems
    assert "epoch 0 mixes policies" in problems


def test_threads_sharing_one_ledger_never_overspend(ledger: Ledger) -> None:
    accepted: list[int] = []
    refused: list[int] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        for _ in range(5):
            try:
                ledger.release(req("loss"), 1.0)
                accepted.append(1)
            except BudgetExceeded:
                refused.append(1)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(accepted) == 10
    assert len(refused) == 30
    assert ledger.spent(0, "north").amount == 1
    assert ledger.verify().ok


def test_no_ledger_target_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DPLEDGER_URL", raising=False)
    with pytest.raises(InvalidInput, match="DPLEDGER_URL"):
        Ledger.open(None, policy())


def test_budget_views_refuse_an_unknown_region(ledger: Ledger) -> None:
    with pytest.raises(InvalidInput, match="unknown region 'nroth'"):
        ledger.remaining(0, "nroth")


def test_parallel_release_keys_must_name_their_requests_region(ledger: Ledger) -> None:
    with pytest.raises(InvalidInput, match="names another region"):
        ledger.release_parallel({"south": (req("loss", region="north"), 1.0)})
    assert len(ledger) == 0


def test_verify_reports_an_unreadable_row_instead_of_raising(tmp_path: Path) -> None:
    import sqlite3

    with Ledger.open(tmp_path / "l.db", policy(), mode="create") as a:
        a.release(req("loss"), 1.0)
    con = sqlite3.connect(tmp_path / "l.db")
    con.execute("DROP TRIGGER dpl_entries_no_update")
    con.execute("UPDATE dpl_entries SET charge = 'one tenth' WHERE seq = 1")
    restore_guards(con)  # a writer refuses a ledger without them
    con.commit()
    con.close()
    with Ledger.open(tmp_path / "l.db", policy()) as b:
        report = b.verify()
    assert not report.ok
    assert "entry 1 is damaged" in " ".join(report.problems)


def test_an_anchored_head_catches_a_truncation_that_rewrote_head_and_spend(
    tmp_path: Path,
) -> None:
    import sqlite3

    with Ledger.open(tmp_path / "l.db", policy(), mode="create") as a:
        a.release(req("loss"), 1.0)
        last = a.release(req("loss"), 1.0)
        first_hash = a.entries()[0].hash
    con = sqlite3.connect(tmp_path / "l.db")  # a thorough editor hides the last release
    con.execute("DROP TRIGGER dpl_entries_no_delete")
    drop_spend_guard(con)
    con.execute("DELETE FROM dpl_entries WHERE seq = 2")
    con.execute("UPDATE dpl_spend SET total = '1/10'")
    con.execute("UPDATE dpl_meta SET value = '1' WHERE key = 'head_seq'")
    con.execute("UPDATE dpl_meta SET value = ? WHERE key = 'head_hash'", (first_hash,))
    restore_guards(con)  # and puts the triggers back
    con.commit()
    con.close()
    with Ledger.open(tmp_path / "l.db", policy()) as b:
        assert b.verify().ok  # without an anchor the chain alone cannot tell
        report = b.verify(expected_head=(last.entry_id, last.entry_hash))
    assert not report.ok
    assert "entry 2 is missing" in report.problems[0]


def test_the_empty_ledgers_head_is_an_anchor_every_later_state_keeps(tmp_path: Path) -> None:
    """Review s32 B2: ``head()`` right after ``init()`` is ``(0, GENESIS)``; kept outside
    the database, it must verify then and after every later release (every chain starts
    from it), and a wrong hash for entry 0 must not."""
    with Ledger.open(tmp_path / "l.db", policy(), mode="create") as led:
        led.init()
        empty = led.head()
        assert empty == (0, GENESIS)
        assert led.verify(expected_head=empty).ok
        led.release(req("loss"), 1.0)
        assert led.verify(expected_head=empty).ok
        report = led.verify(expected_head=(0, "f" * 64))
    assert not report.ok
    assert "entry 0 is not the one anchored" in report.problems[0]
