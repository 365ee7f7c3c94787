"""Ledger safety on every store: reads create nothing, retries never double-spend,
allocations bind, and verify reports every tampering without crashing.

Each test of :class:`TestLedgerSafety` runs once per store (``store`` fixture: a SQLite
file and a schema on the real PostgreSQL server the suite starts).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _stores import CONTRACT, CONTRACT_POLICY, StoreUnderTest

from dpledger import (
    BudgetExceeded,
    Ledger,
    LedgerNotFound,
    Policy,
    PolicyMismatch,
    PolicyWarning,
    ReleaseIdConflict,
    ReleaseRefused,
    ReleaseRequest,
)
from dpledger.errors import DpLedgerError, InvalidInput
from dpledger.ledger.records import chain_hash

N = 100


def loss(region: str = "a", *, rid: str | None = None, epoch: int = 0) -> ReleaseRequest:
    return ReleaseRequest(epoch=epoch, metric="loss", region=region, cohort=N, release_id=rid)


def big(region: str = "a", *, rid: str | None = None) -> ReleaseRequest:
    """ε = 0.95 on a [0, 1] clip: noise scale ≈ 1.05, small against a sum of 100 clients."""
    return ReleaseRequest(epoch=0, metric="big", region=region, cohort=N, release_id=rid)


def snapshot(ledger: Ledger) -> tuple[object, ...]:
    return (
        len(ledger),
        ledger.head(),
        ledger.spent_by_region(0),
        [e.hash for e in ledger.entries()],
    )


with pytest.warns(PolicyWarning, match="over-committed"):  # on purpose: the ledger holds it
    PER_METRIC = Policy.from_toml(
        CONTRACT_POLICY.replace('allocation = "pooled"', 'allocation = "per_metric"').replace(
            'version = "1"', 'version = "per-metric"'
        )
    )


class TestLedgerSafety:
    # -- reads never create ----------------------------------------------------------

    def test_reading_a_missing_ledger_is_an_error_and_creates_nothing(
        self, store: StoreUnderTest
    ) -> None:
        for mode, says in (("read", "reading never"), ("write", "mode='write' never")):
            with pytest.raises(LedgerNotFound) as refused:
                Ledger.open(store.target, CONTRACT, mode=mode)  # type: ignore[arg-type]
            assert f"{says} creates one" in str(refused.value)  # the mode asked (audit 3, 9)
            assert "open with mode='create'" in str(refused.value)
        pending = Ledger.open(store.target, CONTRACT, mode="create")
        try:
            assert pending.check(loss(), 30.0).approved  # a dry run against nothing spent
            with pytest.raises(LedgerNotFound):
                pending.verify()
            refused = ReleaseRequest(epoch=0, metric="loss", region="a", cohort=10)
            with pytest.raises(DpLedgerError):  # below the cohort floor: refused
                pending.release(refused, 3.0)
        finally:
            pending.close()
        with pytest.raises(LedgerNotFound):  # the refusal created nothing
            Ledger.open(store.target, CONTRACT, mode="read")

    def test_a_read_only_ledger_refuses_to_release_and_changes_nothing(
        self, store: StoreUnderTest
    ) -> None:
        store.open().release(loss(), 30.0)
        with Ledger.open(store.target, CONTRACT, mode="read") as reader:
            before = snapshot(reader)
            assert reader.verify().ok
            with pytest.raises(InvalidInput, match="mode='read'"):
                reader.release(loss(), 30.0)
            assert snapshot(reader) == before

    def test_the_first_approved_release_creates_the_ledger(self, store: StoreUnderTest) -> None:
        ledger = store.open()
        assert not ledger.exists
        r = ledger.release(loss(), 30.0)
        assert ledger.exists
        assert r.entry_id == 1
        with Ledger.open(store.target, CONTRACT, mode="read") as reader:
            assert len(reader) == 1
            assert reader.verify().ok

    # -- retries never double-spend -----------------------------------------------------

    def test_a_retry_returns_the_recorded_release_without_charging(
        self, store: StoreUnderTest
    ) -> None:
        first = store.open().release(loss(rid="round-1/a/loss"), 30.0)
        # the caller died after COMMIT and before it saw the value: it retries elsewhere
        retry = store.open().release(loss(rid="round-1/a/loss"), 30.0)
        assert (retry.entry_id, retry.entry_hash) == (first.entry_id, first.entry_hash)
        assert retry.value == first.value
        assert retry.release_id == "round-1/a/loss"
        ledger = store.open()
        assert len(ledger) == 1
        assert ledger.spent(0, "a").amount == Fraction(1, 10)
        assert ledger.entries()[0].draft.release_id == "round-1/a/loss"

    def test_a_retry_is_answered_even_when_the_budget_is_now_spent(
        self, store: StoreUnderTest
    ) -> None:
        ledger = store.open()
        rels = [ledger.release(loss(rid=f"r{i}"), 30.0) for i in range(10)]
        assert ledger.remaining(0, "a").amount == 0
        assert ledger.release(loss(rid="r9"), 30.0).value == rels[9].value
        with pytest.raises(BudgetExceeded):
            ledger.release(loss(rid="r10"), 30.0)

    @pytest.mark.parametrize(
        "change",
        [
            lambda: (big(rid="k"), 90.0),  # an aggregate 60 noise scales (b ≈ 1.05) away
            lambda: (big("b", rid="k"), 30.0),  # another region
            lambda: (loss(rid="k"), 30.0),  # another metric
            lambda: (big(rid="k"), float("nan")),  # an aggregate a release would refuse
        ],
        ids=["aggregate", "region", "metric", "invalid"],
    )
    def test_a_reused_release_id_is_refused_and_changes_nothing(
        self, store: StoreUnderTest, change: Callable[[], tuple[ReleaseRequest, float]]
    ) -> None:
        ledger = store.open()
        ledger.release(big(rid="k"), 30.0)
        before = snapshot(ledger)
        request, aggregate = change()
        with pytest.raises(ReleaseRefused) as refused:
            ledger.release(request, aggregate)
        assert refused.value.verdict is not None
        failed = refused.value.verdict.failures[0].name
        assert failed == ("aggregate_finite" if np.isnan(aggregate) else "release_id")
        assert snapshot(ledger) == before

    def test_the_ledger_keeps_nothing_derived_from_the_aggregate(
        self, store: StoreUnderTest
    ) -> None:
        """A digest of the private sum in a readable entry could be tested against guesses."""
        from dpledger.approval import fingerprint

        ledger = store.open()
        ledger.release(big(rid="k"), 30.0)
        ledger.release(big("b", rid="j"), 70.0)
        a, b = (e.draft for e in ledger.entries())
        assert a.request_hash == fingerprint(big(), None)
        assert b.request_hash == fingerprint(big("b"), None)
        # a retry within the noise of its public release is a retry: the decision reads
        # only the caller's aggregate and the published value
        assert ledger.release(big(rid="k"), 30.5).entry_id == 1

    def test_concurrent_twins_with_one_release_id_record_one_release(
        self, store: StoreUnderTest
    ) -> None:
        store.open().release(loss("b"), 30.0)  # the ledger exists: twins race on the write
        ledgers = [store.open() for _ in range(6)]
        barrier = threading.Barrier(len(ledgers))
        got: list[Any] = []

        def twin(ledger: Ledger) -> None:
            barrier.wait()
            got.append(ledger.release(loss(rid="twin"), 30.0))

        threads = [threading.Thread(target=twin, args=(x,)) for x in ledgers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(got) == 6
        assert {(r.entry_id, float(r.value)) for r in got} == {(got[0].entry_id, got[0].value)}
        assert store.open().spent(0, "a").amount == Fraction(1, 10)

    def test_the_release_id_is_part_of_the_hash_chain(self, store: StoreUnderTest) -> None:
        ledger = store.open()
        ledger.release(loss(rid="mine"), 30.0)
        store.disable_append_only()
        store.raw("UPDATE dpl_entries SET release_id = 'theirs' WHERE seq = 1")
        assert "entry 1: content does not match its hash" in " ".join(ledger.verify().problems)

    # -- the allocation binds --------------------------------------------------------------

    def test_a_metric_cannot_spend_another_metrics_allocation(self, store: StoreUnderTest) -> None:
        ledger = store.open(PER_METRIC)
        ledger.release(loss(), 30.0)
        with pytest.raises(BudgetExceeded) as refused:  # loss had its one release this epoch
            ledger.release(loss(), 30.0)
        assert "metric loss's allocation 1/10" in refused.value.scope
        assert (refused.value.spent.amount, refused.value.remaining.amount) == (Fraction(1, 10), 0)
        assert refused.value.verdict is not None
        assert refused.value.verdict.failures[0].name == "allocation"
        other = ReleaseRequest(epoch=0, metric="hist5", region="a", cohort=N, edges_version="h5/v1")
        assert ledger.release(other, np.full(5, 20.0)).entry_id == 2  # its own share fits
        assert ledger.release(loss(epoch=1), 30.0).entry_id == 3  # a new epoch, a new share
        assert ledger.verify().ok

    # -- verify reports tampering, never crashes -------------------------------------------

    def test_a_raised_budget_in_a_recorded_policy_is_caught_even_with_an_anchor(
        self, store: StoreUnderTest
    ) -> None:
        ledger = store.open()
        for _ in range(10):
            last = ledger.release(loss(), 30.0)  # epoch 0 is full (ε_eval = 1)
        anchor = (last.entry_id, last.entry_hash)
        store.disable_append_only()
        forge_entries(store, ledger, count=5)  # over budget, chained, head and spend rewritten
        body = json.loads(store.raw("SELECT body FROM dpl_policies")[0][0])
        body["epoch_epsilon"] = "400"  # ... and the recorded policy made to allow it
        store.raw("UPDATE dpl_policies SET body = ?", (json.dumps(body, sort_keys=True),))
        report = ledger.verify(expected_head=anchor)
        assert not report.ok
        assert "does not match its content hash" in " ".join(report.problems)

    def test_opening_with_a_changed_policy_under_the_same_version_is_refused(
        self, store: StoreUnderTest
    ) -> None:
        store.open().release(loss(), 30.0)
        raised = CONTRACT_POLICY.replace('epoch_epsilon = "4"', 'epoch_epsilon = "8"')
        changed = Policy.from_toml(raised)
        with pytest.raises(PolicyMismatch, match="needs a new version"):
            store.open(changed)
        bumped = Policy.from_toml(raised.replace('version = "1"', 'version = "2"'))
        ledger = store.open(bumped)
        ledger.release(loss(epoch=1), 30.0)
        report = ledger.verify()
        assert report.ok, report.problems
        assert report.notices == (
            "from epoch 1, policy contract version 2 raised ε_eval from 1 (version 1) to 2",
        )
        assert ledger.budget_changes() == report.notices


def forge_entries(store: StoreUnderTest, ledger: Ledger, count: int) -> None:
    """Append ``count`` well-chained copies of the last entry, and fix head and spend."""
    last = ledger.entries()[-1]
    seq, prev = last.seq, last.hash
    for _ in range(count):
        seq += 1
        h = chain_hash(seq, last.created_at, last.draft, prev)
        row = store.raw(
            "SELECT epoch, scope, metric, policy_name, policy_version, policy_hash, edges_version,"
            " mechanism, unit, charge, cohort, output FROM dpl_entries WHERE seq = ?",
            (last.seq,),
        )[0]
        store.raw(
            "INSERT INTO dpl_entries (seq, created_at, epoch, scope, metric, policy_name, "
            "policy_version, policy_hash, edges_version, mechanism, unit, charge, cohort, output, "
            "release_id, request_hash, principal, prev_hash, hash) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (seq, last.created_at, *row, None, last.draft.request_hash, None, prev, h),
        )
        prev = h
    total = sum((e.draft.charge.amount for e in ledger.entries()), Fraction(0))
    store.raw("UPDATE dpl_spend SET total = ?", (f"{total.numerator}/{total.denominator}",))
    store.raw("UPDATE dpl_meta SET value = ? WHERE key = 'head_seq'", (str(seq),))
    store.raw("UPDATE dpl_meta SET value = ? WHERE key = 'head_hash'", (prev,))


# -- tamperings: every one reported as a problem, none raises ----------------------------

Tamper = Callable[[StoreUnderTest], None]


def sql(*statements: str | tuple[str, tuple[Any, ...]]) -> Tamper:
    """A tampering that runs these statements as someone with database access."""

    def run(s: StoreUnderTest) -> None:
        for st in statements:
            s.raw(*st) if isinstance(st, tuple) else s.raw(st)

    return run


ENTRY = "UPDATE dpl_entries SET {} WHERE seq = 2"
BAD_FACTS = json.dumps({"mechanism": "laplace", "measure": "epsilon", "sensitivity": -1.0,
                        "scale": 1.0, "dimension": 0, "opendp_version": "x"})  # fmt: skip

TAMPERINGS: dict[str, tuple[Tamper, str]] = {
    "output edited": (sql(ENTRY.format("output = '[0.0]'")), "entry 2"),
    "charge lowered": (sql(ENTRY.format("charge = '1/1000'")), "entry 2"),
    "charge unreadable": (sql(ENTRY.format("charge = 'abc'")), "entry 2"),
    "mechanism not JSON": (sql(ENTRY.format("mechanism = '{'")), "entry 2"),
    "mechanism nonsense": (sql((ENTRY.format("mechanism = ?"), (BAD_FACTS,))), "entry 2"),
    "output not JSON": (sql(ENTRY.format("output = 'x'")), "entry 2"),
    "output nested": (sql((ENTRY.format("output = ?"), ("[" * 10**5 + "]" * 10**5,))), "entry 2"),
    "epoch moved": (sql(ENTRY.format("epoch = 7")), "entry 2"),
    "scope moved": (sql(ENTRY.format("scope = 'b'")), "entry 2"),
    "metric renamed": (sql(ENTRY.format("metric = 'nope'")), "entry 2"),
    "cohort changed": (sql(ENTRY.format("cohort = 5")), "entry 2"),
    "unit changed": (sql(ENTRY.format("unit = 'rho'")), "entry 2"),
    "time changed": (sql(ENTRY.format("created_at = 'yesterday'")), "entry 2"),
    "prev_hash changed": (sql((ENTRY.format("prev_hash = ?"), ("0" * 64,))), "entry 2"),
    "hash changed": (sql((ENTRY.format("hash = ?"), ("f" * 64,))), "entry 2"),
    "policy hash changed": (sql((ENTRY.format("policy_hash = ?"), ("a" * 64,))), "entry 2"),
    "middle entry deleted": (sql("DELETE FROM dpl_entries WHERE seq = 2"), "entries 2–2"),
    "last entry deleted": (sql("DELETE FROM dpl_entries WHERE seq = 3"), "chain head"),
    "entries swapped": (
        sql(
            "UPDATE dpl_entries SET seq = 99 WHERE seq = 1",
            "UPDATE dpl_entries SET seq = 1 WHERE seq = 3",
            "UPDATE dpl_entries SET seq = 3 WHERE seq = 99",
        ),
        "entry 1",
    ),
    "head_seq unreadable": (
        sql("UPDATE dpl_meta SET value = 'x' WHERE key = 'head_seq'"),
        "head_seq is unreadable",
    ),
    "head_hash unreadable": (
        sql("UPDATE dpl_meta SET value = 'x' WHERE key = 'head_hash'"),
        "head_hash is unreadable",
    ),
    "head removed": (
        sql("DELETE FROM dpl_meta WHERE key IN ('head_seq', 'head_hash')"),
        "chain head",
    ),
    "spend unreadable": (sql("UPDATE dpl_spend SET total = 'abc'"), "spend row"),
    "spend lowered": (sql("UPDATE dpl_spend SET total = '1/10'"), "spend of epoch 0"),
    "spend deleted": (sql("DELETE FROM dpl_spend"), "spend of epoch 0"),
    "spend invented": (
        sql("INSERT INTO dpl_spend (epoch, scope, metric, total) VALUES (5, 'b', 'loss', '1/2')"),
        "spend of epoch 5",
    ),
    "policy body not JSON": (sql("UPDATE dpl_policies SET body = 'not json'"), "recorded policy"),
    "policy body not a policy": (sql("UPDATE dpl_policies SET body = '[1, 2]'"), "recorded policy"),
    "policy deleted": (sql("DELETE FROM dpl_policies"), "not recorded"),
    "other version doubled": (
        sql(
            *(
                (
                    "INSERT INTO dpl_policies (hash, name, version, body) "
                    "SELECT ?, name, '9', body FROM dpl_policies WHERE version = '1'",
                    (c * 64,),
                )
                for c in "bc"
            )
        ),
        "does not match its content hash",
    ),
}


@pytest.mark.parametrize("name", list(TAMPERINGS), ids=list(TAMPERINGS))
def test_every_tampering_is_reported_naming_its_row_and_nothing_raises(
    store: StoreUnderTest, name: str
) -> None:
    ledger = store.open()
    for region in "aab":
        ledger.release(loss(region), 30.0)
    assert ledger.verify().ok
    store.disable_append_only()
    tamper, named = TAMPERINGS[name]
    tamper(store)
    report = Ledger.open(store.target, CONTRACT, mode="read").verify()
    assert not report.ok
    assert named in " ".join(report.problems), report.problems


def test_the_principal_is_recorded_in_the_chain_and_owns_its_release_ids(
    store: StoreUnderTest,
) -> None:
    ledger = store.open()
    r = ledger.release(loss(rid="team-a/1"), 30.0, principal="key:team-a")
    (entry,) = ledger.entries()
    assert entry.draft.principal == "key:team-a"
    assert entry.as_dict()["principal"] == "key:team-a"
    again = ledger.release(loss(rid="team-a/1"), 30.0, principal="key:team-a")
    assert again.entry_id == r.entry_id
    with pytest.raises(ReleaseIdConflict):  # another principal cannot claim the id
        ledger.release(loss(rid="team-a/1"), 30.0, principal="key:team-b")
    with pytest.raises(InvalidInput, match="principal"):
        ledger.release(loss(rid="x"), 30.0, principal="has space")
    store.disable_append_only()
    store.raw("UPDATE dpl_entries SET principal = 'key:team-b' WHERE seq = 1")
    assert "entry 1: content does not match its hash" in " ".join(ledger.verify().problems)


def test_a_pending_ledger_checks_the_binding_of_one_created_meanwhile(
    store: StoreUnderTest,
) -> None:
    mine = store.open()  # mode create, nothing on disk yet
    assert not mine.exists
    other = Policy.from_toml(CONTRACT_POLICY.replace('name = "contract"', 'name = "other"'))
    store.open(other).release(loss(), 30.0)  # someone else creates it, for another policy
    with pytest.raises(PolicyMismatch, match="policy_name"):
        mine.release(loss(epoch=1), 30.0)
    assert len(store.open(other)) == 1


def test_budget_notices_name_every_loosening_between_versions(store: StoreUnderTest) -> None:
    store.open().release(loss(), 30.0)
    looser = CONTRACT_POLICY.replace('version = "1"', 'version = "2"').replace(
        'allocation = "pooled"', 'allocation = "pooled"\nrounds_per_epoch = 2\ndelta = 1e-5'
    )
    ledger = store.open(Policy.from_toml(looser))
    ledger.release(loss(epoch=1), 30.0)
    notices = ledger.verify().notices
    assert any("raised rounds_per_epoch from 1 (version 1) to 2" in n for n in notices)
    assert any("raised δ from 1e-06 (version 1) to 1e-05" in n for n in notices)


TINY = """
name = "tiny"
version = "1"
neighbouring = "replace"
epoch_epsilon = "1000000000"
eval_fraction = "0.25"
allocation = "pooled"
[regions]
names = ["na"]
[metrics.cm]
kind = "vector_sum"
dimension = 9
cap_per_client = "0.0000001"
nonnegative = true
epsilon = "100000000"
[metrics.loss]
kind = "scalar_mean"
clip = { low = "0", high = "0.0000001", source = "t" }
epsilon = "100000000"
"""


def test_an_exact_retry_below_opendps_grid_returns_the_release(tmp_path: Path) -> None:
    """Audit 5, F3: at a noise scale below OpenDP's 2**-40 output grid the recorded value
    lies up to two grid steps from the aggregate, past ~22 scales: 54 of 100 exact
    retries were ReleaseIdConflict. The retry rule now allows for the grid."""
    policy = Policy.from_toml(TINY, source="tiny")
    assert len(policy.metrics) == 2
    rng = np.random.default_rng(1)
    with Ledger.open(tmp_path / "t.db", policy, mode="create") as ledger:
        for i in range(60):
            metric = "cm" if i % 2 == 0 else "loss"
            agg = rng.uniform(0, 1.5e-6, 9) if metric == "cm" else float(rng.uniform(0, 1.3e-5))
            req = ReleaseRequest(epoch=i, metric=metric, region="na", cohort=138,
                                 release_id=f"r{i}")  # fmt: skip
            first = ledger.release(req, agg)
            assert first.scale < 2.0**-40
            spent = ledger.spent(i, "na")
            again = ledger.release(req, agg)
            assert again.entry_id == first.entry_id
            assert ledger.spent(i, "na") == spent
        with pytest.raises(ReleaseIdConflict):  # a different aggregate is still a conflict
            ledger.release(req, agg + 1e-8)
