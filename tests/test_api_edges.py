"""Edges an outside audit found in the public API: each now a typed error, nothing written.

Corrupted stored integers and negative spend totals are :class:`LedgerCorrupted` (not a
``ValueError`` or "a budget is never negative"); arguments of the wrong type or range are
:class:`InvalidInput` before anything is created; a masked aggregate is refused (NumPy
would unmask it); a request built by ``model_construct`` is validated before it is used.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from factories import drop_spend_guard, restore_guards

from dpledger import Ledger, Policy, ReleaseRequest
from dpledger.errors import (
    InvalidAggregate,
    InvalidInput,
    LedgerCorrupted,
    LedgerOfAnotherPolicy,
    PolicyError,
    PolicyMismatch,
    ReleaseIdConflict,
)
from dpledger.metrics import secure_sum

POLICY = Policy.load(Path(__file__).parent.parent / "policies" / "spatial-eval.toml")
REQ = ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="eu-west", cohort=2400)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """A ledger with one release."""
    p = tmp_path / "l.db"
    with Ledger.open(p, POLICY, mode="create") as ledger:
        ledger.release(REQ, 1234.5)
    return p


def _tamper(path: Path, sql: str) -> bytes:
    """Run ``sql`` on the file (its spend guard dropped first), close (a sqlite3 ``with``
    only commits: the checkpoint on close would otherwise come later, changing the
    bytes), and return the bytes."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            drop_spend_guard(conn)
            conn.execute(sql)
            restore_guards(conn)  # a writer refuses a ledger without them
    finally:
        conn.close()
    return path.read_bytes()


def test_an_unreadable_head_seq_is_a_corrupted_ledger(path: Path) -> None:
    before = _tamper(path, "UPDATE dpl_meta SET value = 'xx' WHERE key = 'head_seq'")
    with Ledger.open(path, POLICY, mode="write") as ledger:
        with pytest.raises(LedgerCorrupted, match="head's seq is unreadable"):
            ledger.head()
        with pytest.raises(LedgerCorrupted, match="head's seq is unreadable"):
            ledger.release(REQ, 1234.5)
    assert path.read_bytes() == before


def test_an_unreadable_epoch_is_a_corrupted_ledger(path: Path) -> None:
    before = _tamper(path, "UPDATE dpl_spend SET epoch = 'x'")
    with (
        Ledger.open(path, POLICY, mode="read") as ledger,
        pytest.raises(LedgerCorrupted, match="an epoch is unreadable"),
    ):
        ledger.epochs()
    assert path.read_bytes() == before


def test_a_negative_spend_total_is_a_corrupted_ledger_not_a_bad_input(path: Path) -> None:
    before = _tamper(path, "UPDATE dpl_spend SET total = '-1'")
    with Ledger.open(path, POLICY, mode="write") as ledger:
        with pytest.raises(LedgerCorrupted, match="negative spend total"):
            ledger.spent(0, "eu-west")
        with pytest.raises(LedgerCorrupted, match="negative spend total"):
            ledger.release(REQ, 1234.5)
    assert path.read_bytes() == before


@pytest.mark.parametrize("target", [b"p.db", 5, 3.5, ["a"], object()])
def test_a_ledger_target_that_is_no_path_is_refused_and_nothing_is_created(
    target: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match="SQLite path"):
        Ledger.open(target, POLICY, mode="create")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"limit": 0}, "limit must be at least 1"),
        ({"limit": -1}, "limit must be at least 1"),
        ({"after": -1}, "after must be a seq"),
        ({"after": 2**70}, "after must be a seq"),
        ({"region": 5}, "region must be a name"),
        ({"metric": b"m"}, "metric must be a name"),
    ],
)
def test_entries_refuse_arguments_out_of_range(path: Path, kwargs: Any, says: str) -> None:
    with Ledger.open(path, POLICY, mode="read") as ledger, pytest.raises(InvalidInput, match=says):
        ledger.entries(**kwargs)


def test_entries_with_a_limit_give_at_most_that_many(path: Path) -> None:
    with Ledger.open(path, POLICY, mode="read") as ledger:
        assert len(ledger.entries(limit=1)) == 1
        assert ledger.entries(after=1) == []


def test_an_expected_head_with_a_negative_id_is_bad_input(path: Path) -> None:
    with Ledger.open(path, POLICY, mode="read") as ledger:
        with pytest.raises(InvalidInput, match="expected_head"):
            ledger.verify(expected_head=(-1, "0" * 64))
        assert ledger.verify(expected_head=ledger.head()).ok


def test_a_masked_aggregate_is_refused_before_any_noise(path: Path) -> None:
    before = path.read_bytes()
    hidden = np.ma.masked_array([1234.5], mask=[True])
    with Ledger.open(path, POLICY, mode="write") as ledger:
        with pytest.raises(InvalidAggregate, match="masked array"):
            ledger.release(REQ, hidden)
        assert not ledger.check(REQ, hidden).approved
    assert path.read_bytes() == before


def test_models_take_keyword_arguments_only_with_a_typed_error() -> None:
    with pytest.raises(InvalidInput, match="keyword arguments only"):
        ReleaseRequest(0, "clipped_mean_loss", "eu-west", 2400)  # type: ignore[misc]
    with pytest.raises(PolicyError, match="keyword arguments only"):
        Policy("x")  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value"), [("cohort", "2400"), ("cohort", 0), ("epoch", -1), ("metric", 7)]
)
def test_a_request_built_without_validation_is_validated_before_use(
    path: Path, field: str, value: Any
) -> None:
    fields = {**REQ.model_dump(), field: value}
    odd = ReleaseRequest.model_construct(**fields)
    before = path.read_bytes()
    with Ledger.open(path, POLICY, mode="write") as ledger:
        with pytest.raises(InvalidInput, match=field):
            ledger.release(odd, 1234.5)
        with pytest.raises(InvalidInput, match=field):
            ledger.check(odd, 1234.5)
    assert path.read_bytes() == before


@pytest.mark.parametrize("rows", [[[1.0, 2.0], [3.0]], [["a", "b"]], [[object()]]])
def test_secure_sum_refuses_rows_that_are_not_numbers(rows: Any) -> None:
    grid = secure_sum.FixedPoint.for_cap(10.0)
    with pytest.raises(InvalidInput, match="contributions must hold real numbers"):
        secure_sum.exact_sum(rows, grid)


def test_a_dry_run_of_a_recorded_release_id_says_what_a_release_would_do(path: Path) -> None:
    """Retry: approved at no charge (a release returns the recorded value); another
    aggregate under the same id: the conflict; a bad aggregate: its own refusal."""
    rid = ReleaseRequest(**{**REQ.model_dump(), "epoch": 1, "release_id": "job-7/loss"})
    with Ledger.open(path, POLICY, mode="write") as ledger:
        first = ledger.release(rid, 1234.5)
        spent = ledger.spent(1, "eu-west")
        retry = ledger.check(rid, 1234.5)
        assert retry.approved
        assert retry.charge is not None
        assert retry.charge.amount == 0
        assert any(c.name == "release_id" and c.passed for c in retry.checks)
        assert ledger.release(rid, 1234.5).entry_id == first.entry_id
        other = ledger.check(rid, 5000.0)  # inside the clip bounds, far from the value
        assert not other.approved
        assert [c.name for c in other.failures] == ["release_id"]
        assert "ReleaseIdConflict" in other.failures[0].reason
        bad = ledger.check(rid, float("nan"))
        assert not bad.approved
        assert "release_id" not in [c.name for c in bad.checks]
        assert ledger.spent(1, "eu-west") == spent


def test_a_dry_run_of_a_recorded_release_id_is_a_retry_only_for_its_principal(
    path: Path,
) -> None:
    """As the release decides: another principal's retry is a conflict, naming no entry."""
    rid = ReleaseRequest(**{**REQ.model_dump(), "epoch": 3, "release_id": "job-9/loss"})
    with Ledger.open(path, POLICY, mode="write") as ledger:
        ledger.release(rid, 1234.5, principal="alice")
        assert ledger.check(rid, 1234.5, principal="alice").approved
        other = ledger.check(rid, 1234.5, principal="mallory")
        assert [c.name for c in other.failures] == ["release_id"]
        assert "entry" not in other.failures[0].reason
        assert not ledger.check(rid, 1234.5).approved  # no principal is not alice
        with pytest.raises(ReleaseIdConflict):
            ledger.release(rid, 1234.5, principal="mallory")
        with pytest.raises(InvalidInput, match="principal"):
            ledger.check(rid, 1234.5, principal="a b")


def test_edges_named_for_a_metric_without_edges_are_passed_and_said_unused(path: Path) -> None:
    """Not refused (earlier clients state one for every metric; their recorded releases'
    retries keep their fingerprint), not silent either: the verdict says it is unused."""
    stated = ReleaseRequest(**{**REQ.model_dump(), "epoch": 2, "edges_version": "h/v1"})
    with Ledger.open(path, POLICY, mode="write") as ledger:
        verdict = ledger.check(stated, 1234.5)
        assert verdict.approved
        (edges,) = [c for c in verdict.checks if c.name == "edges_version"]
        assert "h/v1 is not used" in edges.reason
        assert ledger.release(stated, 1234.5).entry_id == 2


def test_a_ledger_of_another_policy_is_a_policy_mismatch_and_still_ledger_corrupted(
    path: Path,
) -> None:
    """The caller's mistake (PolicyMismatch, no verdict), caught as before by code that
    handles LedgerCorrupted (what earlier versions raised)."""
    other = Policy.from_toml(
        (Path(__file__).parent.parent / "policies" / "spatial-eval.toml")
        .read_text()
        .replace('name = "spatial-eval"', 'name = "other"')
    )
    before = path.read_bytes()
    with pytest.raises(LedgerOfAnotherPolicy, match="policy_name") as e:
        Ledger.open(path, other, mode="write").spent(0)
    assert isinstance(e.value, PolicyMismatch)
    assert isinstance(e.value, LedgerCorrupted)
    assert e.value.verdict is None
    assert path.read_bytes() == before
