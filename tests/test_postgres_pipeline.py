"""The PostgreSQL write path sends its writes and COMMIT in one round trip: its failures.

A release's entry, spend and head go to the server in one pipeline with ``COMMIT``
(and BEGIN, the lock and the state read in another). These tests make the server refuse
each part with a test-only trigger and check what the caller sees: a typed
:class:`StoreError`, never a value, and a ledger that is exactly as before when the
write was refused, or that holds nothing more when the COMMIT failed.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import psycopg
import pytest

from dpledger.approval import ReleaseRequest
from dpledger.errors import BudgetExceeded, CommitUnknown, PolicyMismatch, StoreError
from dpledger.ledger import Ledger
from dpledger.policy import Policy

try:
    from ._stores import CONTRACT, CONTRACT_POLICY
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT, CONTRACT_POLICY

pytestmark = pytest.mark.postgres

_RAISE = """CREATE OR REPLACE FUNCTION dpl_test_refuse() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$"""


def _loss(epoch: int = 0) -> ReleaseRequest:
    return ReleaseRequest(epoch=epoch, metric="loss", region="a", cohort=1000)


def _tables(url: str) -> list[list[tuple[Any, ...]]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [
            conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("dpl_meta", "dpl_entries", "dpl_spend", "dpl_policies")
        ]


def _admin(url: str, *statements: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def test_a_write_the_server_refuses_records_nothing_and_the_session_goes_on(
    pg_url: str,
) -> None:
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(_loss(), 30.0)
        before = _tables(pg_url)
        _admin(
            pg_url,
            _RAISE,
            "CREATE TRIGGER dpl_test_refuse BEFORE INSERT ON dpl_spend "
            "FOR EACH ROW EXECUTE FUNCTION dpl_test_refuse()",
        )
        for epoch in (1, 2):  # the first prepares the write statement, the second reuses it
            with pytest.raises(StoreError, match="refused by the test") as failed:
                ledger.release(_loss(epoch), 30.0)
            assert "nothing was recorded" in str(failed.value)
            assert isinstance(failed.value.__cause__, psycopg.Error)
        assert _tables(pg_url) == before
        _admin(pg_url, "DROP TRIGGER dpl_test_refuse ON dpl_spend")
        assert ledger.release(_loss(1), 30.0).entry_id == 2  # same session, same statements
        assert ledger.release(_loss(2), 30.0).entry_id == 3
        assert ledger.verify().ok


def test_a_commit_the_server_refuses_records_nothing_and_says_so(pg_url: str) -> None:
    """An ERROR answering COMMIT on a live session (here a deferred constraint trigger) is
    PostgreSQL's rollback: a plain StoreError, nothing recorded, the session goes on."""
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(_loss(), 30.0)
        before = _tables(pg_url)
        # a deferred constraint trigger runs at COMMIT: the write succeeds, COMMIT fails
        _admin(
            pg_url,
            _RAISE,
            "CREATE CONSTRAINT TRIGGER dpl_test_refuse AFTER INSERT ON dpl_entries "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION dpl_test_refuse()",
        )
        with pytest.raises(StoreError, match="nothing was recorded") as failed:
            ledger.release(_loss(), 30.0)
        assert not isinstance(failed.value, CommitUnknown)
        assert "refused by the test" in str(failed.value)
        assert _tables(pg_url) == before  # the server rolled it back
        _admin(pg_url, "DROP TRIGGER dpl_test_refuse ON dpl_entries")
        assert ledger.release(_loss(), 30.0).entry_id == 2
        assert ledger.spent(0, "a").amount * 10 == 2
        assert ledger.verify().ok


_END_SESSION = """CREATE OR REPLACE FUNCTION dpl_test_end() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5); RETURN NULL;
END $$"""


def test_a_session_lost_in_its_commit_is_commit_unknown(pg_url: str) -> None:
    """A session that ends in its COMMIT (here the backend terminated by a deferred trigger)
    gives no answer: the outcome is unknown to the caller, CommitUnknown, no value."""
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(_loss(), 30.0)
        _admin(
            pg_url,
            _END_SESSION,
            "CREATE CONSTRAINT TRIGGER dpl_test_end AFTER INSERT ON dpl_entries "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION dpl_test_end()",
        )
        try:
            with pytest.raises(CommitUnknown, match="outcome is unknown") as failed:
                ledger.release(_loss(), 30.0)
            assert "a retry under it returns the recorded release" in str(failed.value)
        finally:
            _admin(pg_url, "DROP TRIGGER dpl_test_end ON dpl_entries")
        assert ledger.release(_loss(), 30.0).entry_id == 2  # it had not landed: now it does
        assert ledger.verify().ok


def test_a_lock_timeout_in_the_first_round_trip_is_a_store_error_and_the_store_goes_on(
    pg_url: str,
) -> None:
    from dpledger.ledger.postgres import LOCK_KEY, PostgresStore

    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(_loss(), 30.0)
    before = _tables(pg_url)
    store = PostgresStore(pg_url, "write", timeout_s=0.2)
    try:
        with psycopg.connect(pg_url) as holder:
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            with pytest.raises(StoreError, match="held the ledger lock"), store.write([0]):
                pytest.fail("the lock was held by another session")  # pragma: no cover
            holder.rollback()
        with store.write([0]) as txn:  # the same session, once the lock is free
            assert txn.spend(0).totals == {("a", "loss"): Fraction(1, 10)}
    finally:
        store.close()
    assert _tables(pg_url) == before


def test_a_refusal_under_the_lock_keeps_the_session_s_prepared_statements(pg_url: str) -> None:
    # psycopg answers a ROLLBACK by deallocating the session's prepared statements unless
    # its own preparation is off: the next release must still find the store's statements
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        for _ in range(10):  # the epoch's whole budget
            ledger.release(_loss(), 30.0)
        with pytest.raises(BudgetExceeded):
            ledger.release(_loss(), 30.0)
        released = len(ledger)
        assert ledger.release(_loss(1), 30.0).entry_id == released + 1
        assert ledger.verify().ok


def test_prepared_statements_dropped_behind_the_store_s_back_are_prepared_again(
    pg_url: str,
) -> None:
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(_loss(), 30.0)
        ledger._store._execute("DEALLOCATE ALL")  # e.g. a pooler's reset, or an operator
        assert ledger.release(_loss(), 30.0).entry_id == 2
        assert ledger.release(_loss(), 30.0).entry_id == 3
        assert ledger.verify().ok


def _flush_then_fail(store: Any, draft: Any) -> None:
    with store.write([0]) as txn:
        txn.stage(draft)
        assert len(txn.flush()) == 1
        raise RuntimeError("after the flush")


def test_writes_held_back_for_the_commit_die_with_a_transaction_that_fails(
    pg_url: str,
) -> None:
    # the entry written by flush() is sent with COMMIT: when the transaction fails after
    # the flush, it is never sent, not then and not with the next transaction's COMMIT
    from dpledger.ledger.postgres import PostgresStore

    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        ledger.release(_loss(), 30.0)
        (entry,) = ledger.entries()
    before = _tables(pg_url)
    store = PostgresStore(pg_url, "write")
    try:
        with pytest.raises(RuntimeError, match="after the flush"):
            _flush_then_fail(store, entry.draft)
        with store.write([0]) as txn:
            assert txn.spend(0).totals == {("a", "loss"): Fraction(1, 10)}
    finally:
        store.close()
    assert _tables(pg_url) == before


def _counted(store: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The store's round trips from now on: each pipeline and each plain statement."""
    trips: list[str] = []
    run, execute = store._run_pipeline, store._execute

    def counted_run(commands: Any, meanwhile: Any = None) -> Any:
        trips.append(f"pipeline of {len(commands)}")
        return run(commands, meanwhile)

    def counted_execute(sql: str, params: Any = ()) -> Any:
        trips.append(sql)
        return execute(sql, params)

    monkeypatch.setattr(store, "_run_pipeline", counted_run)
    monkeypatch.setattr(store, "_execute", counted_execute)
    return trips


def test_what_a_write_reads_under_the_lock_comes_in_the_round_trip_that_takes_it(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger.open(pg_url, CONTRACT, mode="create") as ledger:
        for _ in range(2):  # the session has seen its policy recorded
            ledger.release(_loss(), 30.0)
        releases = ledger._store.sql.releases
        trips = _counted(ledger._store, monkeypatch)
        ledger.release(_loss(), 30.0)  # BEGIN, lock, state; the writes and COMMIT
        assert trips == ["pipeline of 3", "pipeline of 2"]
        trips.clear()
        ledger.release(_loss(1), 30.0)  # a new epoch: its policy binding too
        assert trips == ["pipeline of 4", "pipeline of 2"]
        trips.clear()
        # the retry lookup without the lock; then the ids' entries under it (and epoch
        # 1's binding again: the last read found none, it had no entry yet)
        ledger.release(_loss(1).model_copy(update={"release_id": "r-1"}), 30.0)
        assert trips == [releases, "pipeline of 5", "pipeline of 2"]
        trips.clear()
        ledger.release(_loss(1).model_copy(update={"release_id": "r-2"}), 30.0)
        assert trips == [releases, "pipeline of 4", "pipeline of 2"]
        trips.clear()
        items = [(_loss(2).model_copy(update={"release_id": f"q-{r}"}), 30.0) for r in "ab"]
        ledger.release_round(items)
        assert trips == [releases, "pipeline of 5", "pipeline of 2"]
        assert [e.entry_id for e in ledger.entries(epoch=2)] == [7, 8]
        assert ledger.verify().ok


@pytest.mark.parametrize("rid", ['a"b', "c\\d", "{e,f}", "NULL", '\\"}{,'])
def test_a_twin_committed_between_the_retry_lookup_and_the_lock_is_replayed(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, rid: str
) -> None:
    # the release id is looked up again under the lock, in the round trip that takes it
    # (text[] literal syntax in the id must not change what is looked up)
    request = _loss().model_copy(update={"release_id": rid})
    with (
        Ledger.open(pg_url, CONTRACT, mode="create") as first,
        Ledger.open(pg_url, CONTRACT, mode="create") as second,
    ):
        first.release(_loss(), 30.0)
        lookup = second._store.find_releases
        committed = []

        def then_the_twin_commits(ids: Any) -> Any:
            found = lookup(ids)
            assert found == {}
            committed.append(first.release(request, 30.0))
            return found

        monkeypatch.setattr(second._store, "find_releases", then_the_twin_commits)
        replayed = second.release(request, 30.0)
        assert replayed.entry_id == committed[0].entry_id == 2
        assert np.array_equal(replayed.noisy_sum, committed[0].noisy_sum)
        assert len(second) == 2
        assert second.spent(0, "a").amount == Fraction(2, 10)
        assert second.verify().ok


def test_an_epoch_bound_by_another_writer_s_policy_is_refused_by_the_binding_read_with_the_lock(
    pg_url: str,
) -> None:
    v2 = Policy.from_toml(CONTRACT_POLICY.replace('version = "1"', 'version = "2"'))
    with (
        Ledger.open(pg_url, CONTRACT, mode="create") as v1_writer,
        Ledger.open(pg_url, v2, mode="create") as v2_writer,
    ):
        v2_writer.release(_loss(1), 30.0)  # its session knows epoch 1, not epoch 0
        v1_writer.release(_loss(0), 30.0)  # epoch 0 is bound to version 1 from now on
        before = _tables(pg_url)
        with pytest.raises(PolicyMismatch) as refused:
            v2_writer.release(_loss(0), 30.0)
        assert refused.value.verdict.failures[0].name == "epoch_policy"
        assert _tables(pg_url) == before
        assert v2_writer.release(_loss(1), 30.0).entry_id == 3


def test_text_with_a_nul_character_never_reaches_the_server() -> None:
    # libpq sends a text parameter as a C string: the server would store the text up to
    # the NUL while the chain hashed all of it. The policy refuses such an edges_version
    # (the one free text a release stores), and the pipeline refuses a NUL in any
    # parameter as a second line of defence.
    from dpledger.errors import PolicyError
    from dpledger.ledger.pgpipe import encode

    toml = CONTRACT_POLICY.replace('edges_version = "h5/v1"', 'edges_version = "h5\\u0000v1"')
    with pytest.raises(PolicyError, match="control character"):
        Policy.from_toml(toml)
    with pytest.raises(ValueError, match="NUL"):
        encode([1, "h5\x00v1", None], "utf-8")
    assert encode([1, "h5/v1", None], "utf-8") == [b"1", b"h5/v1", None]
