"""One contract, every store: the ledger-core guarantees on SQLite and on PostgreSQL.

:class:`TestStoreContract` runs each test once per store (a SQLite file; a fresh
schema on the real PostgreSQL server the suite starts, see ``conftest.py``): exact
budget arithmetic and composition, refusals that leave the store untouched, a
database fault mid-release, concurrent first opens, 8-process races that spend
exactly what fits, SIGKILL in the middle of a release loop, tamper detection, the
policy binding, and errors mapped to ``StoreError``. A few PostgreSQL-only behaviours
(password redaction, isolation and durability settings the store must not inherit,
reconnecting after a killed session, the missing-extra message) follow the class.

Children run under the ``forkserver`` start method with dpledger preloaded, so each
of the 8 racing processes is a fork of an interpreter that has already paid ~2 s for
importing OpenDP; each child opens its own ledger, i.e. its own connection.
"""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing as mp
import os
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from multiprocessing.context import BaseContext
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import numpy as np
import pytest

from dpledger import mechanisms as mech
from dpledger.approval import ReleaseRequest
from dpledger.errors import (
    BudgetExceeded,
    CohortTooSmall,
    InvalidAggregate,
    PolicyMismatch,
    ReleaseRefused,
    StoreError,
)
from dpledger.ledger import Ledger
from dpledger.ledger.records import chain_hash
from dpledger.policy import Policy
from dpledger.types import Budget

if __package__:
    from . import _contract_workers as workers
    from ._stores import CONTRACT, CONTRACT_POLICY, StoreUnderTest
else:
    import _contract_workers as workers
    from _stores import CONTRACT, CONTRACT_POLICY, StoreUnderTest


def race_policy(fit: int) -> str:
    """A policy where exactly ``fit`` releases of ``tick`` (ε = 0.01) fit a region's epoch."""
    epoch_epsilon = Decimal(fit) * Decimal("0.04")  # × eval_fraction 0.25 = fit × 0.01
    return f"""
name = "race"
version = "1"
neighbouring = "replace"
epoch_epsilon = "{epoch_epsilon}"
eval_fraction = "0.25"
rounds_per_epoch = {fit}      # tick's allocation: all {fit} releases of the epoch

[regions]
names = ["a", "b"]

[metrics.tick]
kind = "scalar_mean"
epsilon = "0.01"
clip = {{ low = "0", high = "1", source = "contract test" }}
"""


N = 100  # cohort of the contract releases (≥ the loss metric's floor of 60)
RACE_FIT = 137
WRITERS, ATTEMPTS = 8, 50
_HANG_GUARD_S = 300.0  # only so that a wedged child cannot hang the suite

RACE_POLICY = race_policy(RACE_FIT)  # epoch_epsilon 5.48: ε_eval = 1.37
RACE = Policy.from_toml(RACE_POLICY)
SMALL_FIT = 30  # for the races that test something else than volume


def loss(region: str = "a", cohort: int = N, epoch: int = 0) -> ReleaseRequest:
    return ReleaseRequest(epoch=epoch, metric="loss", region=region, cohort=cohort)


def tick(region: str = "a") -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric="tick", region=region, cohort=10)


def hist(buckets: int, region: str = "a") -> tuple[ReleaseRequest, np.ndarray]:
    req = ReleaseRequest(
        epoch=0, metric=f"hist{buckets}", region=region, cohort=N, edges_version=f"h{buckets}/v1"
    )
    return req, np.full(buckets, N / buckets)


# -- multiprocessing --------------------------------------------------------------------


@functools.cache
def _mp() -> BaseContext:
    ctx = mp.get_context("forkserver")
    # the forkserver does not get the tests' sys.path (CPython ≤ 3.12 ignores it there), so
    # preload the installed package: the expensive imports (OpenDP, numpy, psycopg)
    ctx.set_forkserver_preload(["dpledger.ledger.sqlite", "dpledger.ledger.postgres"])
    return ctx


def _children(target: Callable[..., None], argss: list[tuple[Any, ...]]) -> list[Any]:
    """Start one child per args tuple (a barrier and a result queue are appended); their
    reports, sorted. Children are killed if the reports do not all arrive."""
    ctx = _mp()
    barrier = ctx.Barrier(len(argss))
    results = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*a, barrier, results)) for a in argss]
    for p in procs:
        p.start()
    try:
        return sorted(results.get(timeout=_HANG_GUARD_S) for _ in procs)
    except BaseException:
        for p in procs:
            p.kill()
        raise
    finally:
        for p in procs:
            p.join()


def _race(
    target: str, plans: list[tuple[dict[str, Any], int]], policy_toml: str = RACE_POLICY
) -> list[tuple[int, list[int], int]]:
    """Run one racing child per plan ``(request, attempts)``; their (index, ids, refused)."""
    got = _children(
        workers.race,
        [(i, target, policy_toml, req, 0.5 * req["cohort"], n) for i, (req, n) in enumerate(plans)],
    )
    errors = [err for *_, err in got if err]
    assert not errors, "\n".join(errors)
    return [(i, ids, refused) for i, ids, refused, _ in got]


def _looping_writer(store: StoreUnderTest, req: dict[str, Any]) -> tuple[Any, Any]:
    """A child process releasing ``req`` in a loop, reporting (entry id, value) after each."""
    ctx = _mp()
    reader, writer = ctx.Pipe(duplex=False)
    child = ctx.Process(
        target=workers.release_until_killed,
        args=(store.target, RACE_POLICY, req, 5.0, 100, writer),
    )
    child.start()
    writer.close()
    return child, reader


def _snapshot(ledger: Ledger) -> tuple[object, ...]:
    return (
        len(ledger),
        ledger.head(),
        ledger.spent_by_region(0),
        [e.hash for e in ledger.entries()],
    )


def _named_entries(problems: tuple[str, ...]) -> set[int]:
    return {int(m) for p in problems for m in re.findall(r"\bentry (\d+)", p)}


# -- refusal cases ----------------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    request: ReleaseRequest
    aggregate: object
    error: type[ReleaseRefused]
    check: str


def _h5(edges: str = "h5/v1") -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric="hist5", region="a", cohort=N, edges_version=edges)


REFUSALS: dict[str, Refusal] = {
    "nan": Refusal(loss(), float("nan"), InvalidAggregate, "aggregate_finite"),
    "inf": Refusal(loss(), float("inf"), InvalidAggregate, "aggregate_finite"),
    "wrong_length": Refusal(_h5(), np.full(4, 1.0), InvalidAggregate, "aggregate_shape"),
    "object_dtype": Refusal(
        _h5(), np.array([1, 1, 1, 1, None], dtype=object), InvalidAggregate, "aggregate_dtype"
    ),
    "two_d": Refusal(_h5(), np.ones((1, 5)), InvalidAggregate, "aggregate_shape"),
    "negative_counts": Refusal(
        _h5(), np.array([30.0, 30, 30, 0, -10]), InvalidAggregate, "counts_nonnegative"
    ),
    "over_cap_histogram": Refusal(_h5(), np.full(5, 30.0), InvalidAggregate, "clipping_bounds"),
    "over_clip_scalar": Refusal(loss(), 1.5 * N, InvalidAggregate, "clipping_bounds"),
    "unknown_metric": Refusal(
        ReleaseRequest(epoch=0, metric="nope", region="a", cohort=N),
        1.0,
        PolicyMismatch,
        "metric_known",
    ),
    "stale_edges_version": Refusal(
        _h5(edges="h5/v0"), np.full(5, 20.0), PolicyMismatch, "edges_version"
    ),
    "cohort_below_floor": Refusal(loss(cohort=10), 3.0, CohortTooSmall, "cohort_floor"),
    "over_budget": Refusal(
        ReleaseRequest(epoch=0, metric="big", region="a", cohort=N), 30.0, BudgetExceeded, "budget"
    ),
}


class TestStoreContract:
    """The ledger-core guarantees, identical on every store."""

    # -- budget exactness and composition ---------------------------------------------

    def test_ten_releases_of_a_tenth_fit_a_budget_of_one_and_the_eleventh_is_refused(
        self, store: StoreUnderTest
    ) -> None:
        ledger = store.open()
        for _ in range(10):
            assert ledger.release(loss(), 30.0).charge.amount == Fraction(1, 10)
        assert ledger.spent(0, "a").amount == 1
        assert ledger.remaining(0, "a").amount == 0
        with pytest.raises(BudgetExceeded) as refused:
            ledger.release(loss(), 30.0)
        e = refused.value
        assert (e.requested.amount, e.spent.amount, e.remaining.amount) == (Fraction(1, 10), 1, 0)
        assert e.scope == "epoch 0, region a"
        assert len(ledger) == 10
        assert ledger.verify().ok

    def test_a_20_bucket_histogram_costs_exactly_the_epsilon_of_a_5_bucket_one(
        self, store: StoreUnderTest
    ) -> None:
        ledger = store.open()
        r5 = ledger.release(*hist(5))
        after5 = ledger.spent(0, "a").amount
        r20 = ledger.release(*hist(20))
        assert after5 == Fraction(1, 10)
        assert ledger.spent(0, "a").amount - after5 == after5
        assert r20.charge.amount == r5.charge.amount == Fraction(1, 10)
        # one calibration at the L1 sensitivity of the whole vector, never ε split per bucket
        # (which would make the 20-bucket scale 4× the 5-bucket one); OpenDP's conservative
        # rounding of the map grows with the dimension, so calibration nudges it by ~1e-11
        assert r20.facts.sensitivity == r5.facts.sensitivity == pytest.approx(2.0, rel=2e-12)
        assert r20.scale == pytest.approx(r5.scale, rel=1e-9)
        assert mech.privacy_loss(r20.facts) == mech.privacy_loss(r5.facts) <= Fraction(1, 10)
        assert np.shape(r20.value) == (20,)
        assert ledger.verify().ok

    def test_two_scalar_releases_in_one_region_add_up(self, store: StoreUnderTest) -> None:
        ledger = store.open()
        ledger.release(loss(), 30.0)
        ledger.release(loss(), 40.0)
        assert ledger.spent(0, "a").amount == Fraction(2, 10)
        assert ledger.spent_by_region(0) == {"a": Budget(Fraction(2, 10), "epsilon")}

    def test_releases_in_two_regions_do_not_add_up(self, store: StoreUnderTest) -> None:
        ledger = store.open()
        ledger.release(loss("a"), 30.0)
        ledger.release(loss("b"), 30.0)
        assert ledger.spent(0, "a").amount == ledger.spent(0, "b").amount == Fraction(1, 10)
        big = ReleaseRequest(epoch=0, metric="big", region="b", cohort=N)
        with pytest.raises(BudgetExceeded):  # 0.1 + 0.95 > 1 in b ...
            ledger.release(big, 30.0)
        ledger.release(loss("b", epoch=1), 30.0)  # ... while the next epoch is untouched
        assert ledger.spent(1, "b").amount == Fraction(1, 10)

    def test_a_global_release_counts_in_every_region(self, store: StoreUnderTest) -> None:
        ledger = store.open()
        ledger.release(loss("*"), 30.0)
        assert ledger.spent(0, "a").amount == ledger.spent(0, "b").amount == Fraction(1, 10)
        for _ in range(9):
            ledger.release(loss("a"), 30.0)
        assert ledger.spent(0, "a").amount == 1
        with pytest.raises(BudgetExceeded) as refused:  # must fit in every region: a is full
            ledger.release(loss("*"), 30.0)
        assert "a" in refused.value.scope
        ledger.release(loss("b"), 30.0)  # b's clients still have budget
        assert ledger.spent(0, "b").amount == Fraction(2, 10)
        assert ledger.verify().ok

    def test_spend_and_chain_survive_reopening(self, store: StoreUnderTest) -> None:
        ledger = store.open()
        for region in "aab":
            ledger.release(loss(region), 30.0)
        before = _snapshot(ledger)
        ledger.close()
        again = store.open()
        assert _snapshot(again) == before
        assert again.release(loss("b"), 30.0).entry_id == 4
        assert again.verify().ok

    # -- refusals leave the store unchanged ---------------------------------------------

    @pytest.mark.parametrize("case", list(REFUSALS), ids=list(REFUSALS))
    def test_a_refused_release_leaves_the_store_unchanged(
        self, store: StoreUnderTest, case: str
    ) -> None:
        r = REFUSALS[case]
        ledger = store.open()
        ledger.release(loss(), 30.0)
        before = _snapshot(ledger)
        verdict = ledger.check(r.request, r.aggregate)
        assert not verdict.approved
        assert verdict.failures[0].name == r.check
        with pytest.raises(r.error) as refused:
            ledger.release(r.request, r.aggregate)
        assert type(refused.value) is r.error
        assert refused.value.verdict.failures[0].name == r.check
        assert _snapshot(ledger) == before
        assert _snapshot(store.open()) == before  # nothing pending on another connection
        assert ledger.verify().ok

    def test_a_database_fault_mid_release_rolls_back_and_unlocks(
        self, store: StoreUnderTest
    ) -> None:
        ledger = store.open()
        ledger.release(loss(), 30.0)
        before = _snapshot(ledger)
        store.fail_inserts(True)
        with pytest.raises(StoreError) as failed:
            ledger.release(loss(), 30.0)
        assert isinstance(failed.value.__cause__, store.db_error)
        store.fail_inserts(False)
        assert _snapshot(ledger) == before
        # the write lock was released: this and another connection can write
        assert ledger.release(loss(), 30.0).entry_id == 2
        assert store.open().release(loss(), 30.0).entry_id == 3
        assert ledger.verify().ok

    # -- concurrency --------------------------------------------------------------------

    @pytest.mark.slow
    def test_racing_processes_spend_exactly_what_fits(self, store: StoreUnderTest) -> None:
        # 8 processes race 50 releases each: 400 attempts, exactly 137 fit
        ledger = store.open(RACE)
        req = {"epoch": 0, "metric": "tick", "region": "a", "cohort": 10}
        got = _race(store.target, [(req, ATTEMPTS)] * WRITERS)
        ids = [i for _, accepted, _ in got for i in accepted]
        assert len(ids) == RACE_FIT
        assert sum(refused for *_, refused in got) == WRITERS * ATTEMPTS - RACE_FIT
        assert sorted(ids) == list(range(1, RACE_FIT + 1))  # one linear chain, no gaps
        assert ledger.spent(0, "a").amount == RACE.eval_budget == Fraction(137, 100)
        report = ledger.verify()
        assert report.ok, report.problems
        assert report.entries_checked == RACE_FIT

    @pytest.mark.slow
    def test_racing_processes_in_disjoint_regions_each_spend_what_fits(
        self, store: StoreUnderTest
    ) -> None:
        # parallel composition under a race: 4 writers per region, 40 attempts a region
        policy = race_policy(SMALL_FIT)
        plans = [
            ({"epoch": 0, "metric": "tick", "region": "ab"[i % 2], "cohort": 10}, 10)
            for i in range(WRITERS)
        ]
        ledger = store.open(Policy.from_toml(policy))
        got = _race(store.target, plans, policy)
        for region in "ab":
            assert ledger.spent(0, region).amount == Fraction(SMALL_FIT, 100)
            assert len(ledger.entries(region=region)) == SMALL_FIT
        assert sum(len(ids) for _, ids, _ in got) == 2 * SMALL_FIT
        report = ledger.verify()
        assert report.ok, report.problems

    @pytest.mark.slow
    def test_concurrent_first_opens_all_succeed_and_create_one_schema(
        self, store: StoreUnderTest
    ) -> None:
        # 3 fresh ledgers, each opened by 8 processes at the same moment: PostgreSQL's
        # CREATE TABLE IF NOT EXISTS is not concurrency-safe, SQLite's switch to WAL
        # answers "database is locked" without waiting (both handled by the stores)
        targets = [store.fresh_target() for _ in range(3)]
        got = _children(workers.open_together, [(i, targets, RACE_POLICY) for i in range(WRITERS)])
        errors = [e for _, errs in got for e in errs]
        assert not errors, "\n".join(errors)
        for target in targets:
            with Ledger.open(target, RACE) as ledger:
                assert len(ledger) == 0
                assert ledger.release(tick(), 5.0).entry_id == 1
                assert ledger.verify().ok

    # -- crash safety -------------------------------------------------------------------

    @pytest.mark.slow
    def test_sigkill_mid_loop_leaves_a_verifiable_ledger_with_every_returned_value(
        self, store: StoreUnderTest
    ) -> None:
        req = {"epoch": 0, "metric": "tick", "region": "a", "cohort": 10}
        child, reader = _looping_writer(store, req)
        try:
            reported = [reader.recv() for _ in range(30)]  # the child is still looping
        finally:
            os.kill(child.pid or 0, signal.SIGKILL)
            child.join(_HANG_GUARD_S)
        assert child.exitcode == -signal.SIGKILL
        while True:  # values returned before the kill, possibly a torn last message
            try:
                reported.append(reader.recv())
            except (EOFError, OSError):
                break
        ledger = store.open(RACE)
        report = ledger.verify()
        assert report.ok, report.problems
        recorded = {e.seq: e.draft.output for e in ledger.entries()}
        for entry_id, value in reported:
            assert recorded[entry_id] == (value,), f"entry {entry_id} lost or changed"
        assert [i for i, _ in reported] == list(range(1, len(reported) + 1))
        assert len(recorded) >= len(reported)  # over-counting is allowed, never under
        # the dead writer left no lock behind: the next release goes through
        nxt = ledger.release(ReleaseRequest(**{**req, "epoch": 99}), 5.0)
        assert nxt.entry_id == len(recorded) + 1

    def test_verify_while_another_process_writes_reports_no_false_alarm(
        self, store: StoreUnderTest
    ) -> None:
        # verify reads entries, head and spend in one snapshot: a commit landing between
        # those reads must not look like a deleted entry or a spend mismatch
        req = {"epoch": 0, "metric": "tick", "region": "a", "cohort": 10}
        child, reader = _looping_writer(store, req)
        ledger = store.open(RACE)
        try:
            reader.recv()  # the writer is under way
            reports = [ledger.verify() for _ in range(25)]
        finally:
            os.kill(child.pid or 0, signal.SIGKILL)
            child.join(_HANG_GUARD_S)
        assert [r.problems for r in reports if not r.ok] == []
        assert reports[-1].entries_checked >= 1

    # -- tamper detection ---------------------------------------------------------------

    def _five_entries(self, store: StoreUnderTest) -> Ledger:
        ledger = store.open()
        for _ in range(5):
            ledger.release(loss(), 30.0)
        assert ledger.verify().ok
        return ledger

    def test_the_database_refuses_to_update_or_delete_entries(self, store: StoreUnderTest) -> None:
        ledger = self._five_entries(store)
        with pytest.raises(store.db_error, match="append-only"):
            store.raw("UPDATE dpl_entries SET output = '[0.0]' WHERE seq = 3")
        with pytest.raises(store.db_error, match="append-only"):
            store.raw("DELETE FROM dpl_entries WHERE seq = 5")
        if store.kind == "postgres":
            with pytest.raises(store.db_error, match="append-only"):
                store.raw("TRUNCATE dpl_entries")
        assert len(ledger) == 5
        assert ledger.verify().ok

    def test_editing_an_entrys_output_is_detected_naming_it(self, store: StoreUnderTest) -> None:
        ledger = self._five_entries(store)
        store.disable_append_only()
        store.raw("UPDATE dpl_entries SET output = ? WHERE seq = ?", ("[0.0]", 3))
        report = ledger.verify()
        assert not report.ok
        assert _named_entries(report.problems) == {3}

    def test_editing_an_entrys_charge_is_detected_naming_it(self, store: StoreUnderTest) -> None:
        ledger = self._five_entries(store)
        store.disable_append_only()
        store.raw("UPDATE dpl_entries SET charge = ? WHERE seq = ?", ("1/1000", 3))
        report = ledger.verify()
        assert _named_entries(report.problems) == {3}
        assert any("spend of epoch 0 scope 'a'" in p for p in report.problems)

    def test_rewriting_the_chain_to_hide_a_lower_charge_is_caught_by_rederivation(
        self, store: StoreUnderTest
    ) -> None:
        # the attacker lowers entry 3's charge and recomputes every later hash, the
        # head and the spend total: only re-deriving ε through OpenDP can catch it
        ledger = self._five_entries(store)
        store.disable_append_only()
        prev = None
        for e in ledger.entries():
            draft = e.draft
            if e.seq == 3:
                draft = dataclasses.replace(draft, charge=Budget(Fraction(1, 1000), "epsilon"))
            prev_hash = e.prev_hash if prev is None else prev
            h = chain_hash(e.seq, e.created_at, draft, prev_hash)
            store.raw(
                "UPDATE dpl_entries SET charge = ?, prev_hash = ?, hash = ? WHERE seq = ?",
                (draft.charge.text, prev_hash, h, e.seq),
            )
            prev = h
        store.raw("UPDATE dpl_meta SET value = ? WHERE key = 'head_hash'", (prev,))
        total = Fraction(4, 10) + Fraction(1, 1000)
        store.raw(
            "UPDATE dpl_spend SET total = ? WHERE scope = 'a'",
            (f"{total.numerator}/{total.denominator}",),
        )
        report = ledger.verify()
        assert _named_entries(report.problems) == {3}
        assert any("under-counts" in p for p in report.problems)

    def _rewrite_scale(self, store: StoreUnderTest, ledger: Ledger, factor: float) -> None:
        """Re-record entry 3 with ``factor`` × its noise scale, re-chaining every later hash."""
        prev = None
        for e in ledger.entries():
            draft = e.draft
            if e.seq == 3:
                facts = dataclasses.replace(draft.facts, scale=draft.facts.scale * factor)
                draft = dataclasses.replace(draft, facts=facts)
            prev_hash = e.prev_hash if prev is None else prev
            h = chain_hash(e.seq, e.created_at, draft, prev_hash)
            store.raw(
                "UPDATE dpl_entries SET mechanism = ?, prev_hash = ?, hash = ? WHERE seq = ?",
                (draft.facts.as_json(), prev_hash, h, e.seq),
            )
            prev = h
        store.raw("UPDATE dpl_meta SET value = ? WHERE key = 'head_hash'", (prev,))

    def test_an_entry_with_more_noise_than_calibrated_verifies_and_less_is_caught(
        self, store: StoreUnderTest
    ) -> None:
        # an earlier calibration may have recorded a few ulps more noise: still sound
        ledger = self._five_entries(store)
        with store.tampering():
            self._rewrite_scale(store, ledger, 1 + 1e-12)
        assert ledger.verify().ok
        with store.tampering():
            self._rewrite_scale(store, ledger, 0.5 / (1 + 1e-12))
        report = ledger.verify()
        assert _named_entries(report.problems) == {3}
        assert any("differ from what its policy calibrates" in p for p in report.problems)

    def test_deleting_a_middle_entry_is_detected_naming_the_gap(
        self, store: StoreUnderTest
    ) -> None:
        ledger = self._five_entries(store)
        store.disable_append_only()
        store.raw("DELETE FROM dpl_entries WHERE seq = 3")
        report = ledger.verify()
        assert any("entries 3–3 are missing" in p for p in report.problems), report.problems
        assert any("spend of epoch 0" in p for p in report.problems)

    def test_deleting_the_last_entry_is_detected(self, store: StoreUnderTest) -> None:
        ledger = self._five_entries(store)
        store.disable_append_only()
        store.raw("DELETE FROM dpl_entries WHERE seq = 5")
        report = ledger.verify()
        assert any("chain head is entry 5" in p for p in report.problems), report.problems
        assert any("spend of epoch 0" in p for p in report.problems)

    # -- binding, configuration, errors -------------------------------------------------

    def test_reopening_with_another_policy_is_refused(self, store: StoreUnderTest) -> None:
        store.open().release(loss(), 30.0)
        other = Policy.from_toml(CONTRACT_POLICY.replace('name = "contract"', 'name = "other"'))
        with pytest.raises(PolicyMismatch, match="policy_name"):
            store.open(other)
        assert len(store.open()) == 1

    def test_database_errors_surface_as_store_error(self, store: StoreUnderTest) -> None:
        with (
            pytest.raises(StoreError) as failed,
            Ledger.open(store.unreachable, CONTRACT, mode="create") as ledger,
        ):
            ledger.release(loss(), 30.0)  # SQLite: the ledger's directory does not exist
        assert isinstance(failed.value.__cause__, store.db_error)
        assert "s3cret" not in str(failed.value)

    def test_dpledger_url_names_the_ledger_when_no_target_is_given(
        self, store: StoreUnderTest, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("DPLEDGER_URL", store.target)
        with Ledger.open(None, CONTRACT, mode="create") as ledger:
            ledger.release(loss(), 30.0)
        assert len(store.open()) == 1


# -- PostgreSQL-only behaviour --------------------------------------------------------


def _with_session_defaults(url: str, settings: str) -> str:
    """``url`` with more ``-c name=value`` session defaults, as a server or DBA might set."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["options"] = f"{query.get('options', '')} {settings}".strip()
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


@pytest.mark.postgres
def test_postgres_location_hides_the_password(pg_url: str) -> None:
    # trust authentication accepts any password, so this URL really connects
    url = pg_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret@")
    url += "&password=s3cret&application_name=t"
    with Ledger.open(url, CONTRACT, mode="create") as ledger:
        ledger.release(loss(), 30.0)
        assert "s3cret" not in ledger.location
        assert ledger.location.startswith("postgresql://postgres@127.0.0.1:")
        assert "application_name=t" in ledger.location


@pytest.mark.postgres
def test_postgres_store_does_not_inherit_unsafe_session_defaults(pg_url: str) -> None:
    from dpledger.ledger.postgres import PostgresStore

    url = _with_session_defaults(
        pg_url, "-c synchronous_commit=off -c default_transaction_isolation=serializable"
    )
    s = PostgresStore(url, "create")
    try:
        assert s._execute("SHOW synchronous_commit") == [("on",)]
        with s._write_transaction():
            assert s._execute("SHOW transaction_isolation") == [("read committed",)]
    finally:
        s.close()


@pytest.mark.postgres
def test_postgres_write_reads_its_epochs_state_with_the_lock(pg_url: str) -> None:
    # the spend of the epochs a write names is read in the round trip that takes the
    # lock: loading them sends no statement, and equals a separate read; an epoch it
    # did not name is still read, on demand
    from dpledger.ledger.postgres import PostgresStore

    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(loss(), 30.0)
        ledger.release(loss(region="b", epoch=3), 30.0)
    s = PostgresStore(pg_url, "write")
    sent: list[str] = []
    execute = s._execute

    def counted(sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        sent.append(sql)
        return execute(sql, params)

    try:
        expected, later = s.epoch_spend(0).totals, s.epoch_spend(3).totals
        assert expected
        assert later
        s._execute = counted  # type: ignore[method-assign]
        with s.write([0]) as txn:
            sent.clear()
            txn.load([0], [])
            assert sent == []
            assert txn.spend(0).totals == expected
            txn.load([3], [])
            assert len(sent) == 1
            assert txn.spend(3).totals == later
        assert s._prefetched is None
    finally:
        s.close()


@pytest.mark.postgres
@pytest.mark.slow
def test_postgres_racing_writers_never_overspend_under_a_repeatable_read_default(
    pg_url: str,
) -> None:
    # under REPEATABLE READ the snapshot would predate the lock wait and the budget
    # re-check would read stale spend: the store must not inherit that default
    url = _with_session_defaults(pg_url, "-c default_transaction_isolation=repeatable\\ read")
    policy = race_policy(SMALL_FIT)
    req = {"epoch": 0, "metric": "tick", "region": "a", "cohort": 10}
    got = _race(url, [(req, 10)] * WRITERS, policy)
    assert sum(len(ids) for _, ids, _ in got) == SMALL_FIT
    with Ledger.open(pg_url, Policy.from_toml(policy), mode="create") as ledger:
        assert ledger.spent(0, "a").amount == Fraction(SMALL_FIT, 100)
        assert ledger.verify().ok


@pytest.mark.postgres
def test_postgres_ledger_reconnects_after_its_session_is_killed_between_releases(
    pg_url: str,
) -> None:
    import psycopg

    with Ledger.open(pg_url + "&application_name=victim", CONTRACT, mode="create") as ledger:
        ledger.release(loss(), 30.0)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            killed = admin.execute(
                # with a timeout it returns once the backend has exited, not just been told to
                "SELECT pg_terminate_backend(pid, 60000) FROM pg_stat_activity "
                "WHERE application_name = 'victim'"
            ).fetchall()
        assert killed == [(True,)]
        assert ledger.release(loss(), 30.0).entry_id == 2  # a new session, transparently
        assert ledger.spent(0, "a").amount == Fraction(2, 10)
        assert ledger.verify().ok


def test_missing_psycopg_is_a_store_error_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg -> ImportError
    monkeypatch.delitem(sys.modules, "dpledger.ledger.postgres", raising=False)
    with pytest.raises(StoreError, match=re.escape("pip install 'dpledger[postgres]'")):
        Ledger.open("postgresql://u:pw@127.0.0.1:1/x", CONTRACT)
