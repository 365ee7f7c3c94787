"""Bad input through the Python API: always a typed DpLedgerError, never another exception,
and refusals that cannot depend on private data (neighbouring datasets, both relations)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from factories import BASE, SPATIAL, policy
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger import (
    ALL,
    DpLedgerError,
    InvalidInput,
    Ledger,
    Policy,
    PolicyError,
    ReleaseRequest,
)
from dpledger.accounting import EpochSpend
from dpledger.approval import evaluate
from dpledger.types import Budget

GOOD = {"epoch": 0, "metric": "loss", "region": "north", "cohort": 100}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("epoch", True),
        ("epoch", 1.0),
        ("epoch", "3"),
        ("epoch", -1),
        ("epoch", 2**63),
        ("cohort", True),
        ("cohort", 2400.0),
        ("cohort", "2400"),
        ("cohort", 0),
        ("cohort", 10**10),
        ("metric", 5),
        ("region", ""),
        ("release_id", "has space"),
        ("release_id", "x" * 129),
        ("nonsense", 1),
    ],
)
def test_a_bad_request_field_is_invalid_input_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(InvalidInput) as info:
        ReleaseRequest(**{**GOOD, field: value})  # type: ignore[arg-type]
    text = str(info.value)
    assert field in text
    assert "pydantic" not in text  # no documentation URLs in a message a user reads
    with pytest.raises(InvalidInput):
        ReleaseRequest.model_validate({**GOOD, field: value})


def test_budget_views_refuse_epochs_no_store_can_hold(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db", policy(), mode="create") as ledger:
        ledger.release(ReleaseRequest(**GOOD), 1.0)  # type: ignore[arg-type]
        for epoch in (2**63, -1, True, 1.5):
            with pytest.raises(InvalidInput, match="epoch"):
                ledger.spent(epoch, "north")  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="unknown region"):
            ledger.lifetime("nroth")


def test_every_policy_problem_is_listed_not_just_the_first() -> None:
    text = BASE.format(
        neighbouring="swap", epoch_epsilon="4", eval_fraction="0.25", scalar_eps="-1",
        edges20="1.0, 2.0", version="1",
    )  # fmt: skip
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(text.replace('low = "-1"', 'low = "5"'), source="bad.toml")
    message = str(info.value)
    for problem in ("neighbouring", "metrics.loss", "metrics.loss_b.clip"):
        assert problem in message
    assert "more problems" not in message
    assert "errors.pydantic.dev" not in message


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"name = \xff\xfe", "UTF-8"),
        (b"a = " + b"[" * 100_000 + b"]" * 100_000, "nested too deeply|not valid TOML"),
        (b"[[[", "not valid TOML"),
    ],
)
def test_an_unreadable_policy_file_is_a_policy_error(
    tmp_path: Path, content: bytes, match: str
) -> None:
    path = tmp_path / "p.toml"
    path.write_bytes(content)
    with pytest.raises(PolicyError, match=match):
        Policy.load(path)


def test_constructing_a_policy_directly_raises_a_policy_error() -> None:
    with pytest.raises(PolicyError):
        Policy(name="x", version="1", neighbouring="replace")  # type: ignore[call-arg]


def test_spent_means_what_a_client_of_the_region_has_lost(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db", policy(), mode="create") as ledger:
        ledger.release(ReleaseRequest(**{**GOOD, "region": ALL}), 1.0)  # type: ignore[arg-type]
        ledger.release(ReleaseRequest(**GOOD), 1.0)  # type: ignore[arg-type]
        tenth = Budget(Fraction(1, 10), "epsilon")
        assert ledger.spent_by_region(0) == {ALL: tenth, "north": tenth}
        # a client of north lost both; one of south the global release only
        assert ledger.spent(0, "north").amount == Fraction(2, 10)
        assert ledger.spent(0, "south").amount == Fraction(1, 10)
        assert (
            ledger.spent(0).amount == ledger.spent(0, ALL).amount == Fraction(2, 10)
        )  # the worst client


# -- refusals never depend on the data beyond what is charged ------------------------------

ADD_REMOVE = """
name = "neighbours"
version = "1"
neighbouring = "{relation}"
epoch_epsilon = "4"

[regions]
names = ["r"]

[metrics.x]
kind = "scalar_mean"
epsilon = "0.1"
clip = {{ low = "1", high = "10", source = "test: a clip that excludes 0" }}

[metrics.v]
kind = "vector_sum"
epsilon = "0.1"
dimension = 3
cap_per_client = "2"
nonnegative = false
"""


@settings(max_examples=80, deadline=None)
@given(
    relation=st.sampled_from(["replace", "add_remove"]),
    values=st.lists(st.floats(1.0, 10.0), min_size=2, max_size=120),
    swap=st.floats(1.0, 10.0),
)
def test_neighbouring_datasets_get_the_same_verdict(
    relation: str, values: list[float], swap: float
) -> None:
    """Clipped clients: a dataset and its neighbour are both approved.

    Under replace the cohort is public (the clients summed); under add_remove it is the
    planned cohort (100 here), and the neighbour has one client fewer.
    """
    p = Policy.from_toml(ADD_REMOVE.format(relation=relation))
    data = np.asarray(values)
    add_remove = relation == "add_remove"
    cohort = max(100, len(values)) if add_remove else len(values)
    req = ReleaseRequest(epoch=0, metric="x", region="r", cohort=cohort)
    neighbour = data[1:] if add_remove else np.concatenate([[swap], data[1:]])
    found = [evaluate(p, req, float(d.sum()), EpochSpend.empty()) for d in (data, neighbour)]
    assert all(f.prepared is not None for f in found)


def test_add_remove_approves_a_cohort_short_of_its_plan_with_a_clip_excluding_zero() -> None:
    """The issue's case: clip [1, 10], planned cohort 100, the neighbour has 99 clients."""
    p = Policy.from_toml(ADD_REMOVE.format(relation="add_remove"))
    req = ReleaseRequest(epoch=0, metric="x", region="r", cohort=100)
    for n in (100, 99, 1):
        assert evaluate(p, req, float(n), EpochSpend.empty()).prepared is not None, n
    assert evaluate(p, req, -1.0, EpochSpend.empty()).prepared is None  # < 0: no count has it


def test_add_remove_approves_one_client_more_than_planned_a_refusal_would_tell_them_apart() -> None:
    """Audit 3: 1000 planned, D has 1000 clients at the top of the clip and its neighbour
    D' one more; a bound growing with the planned count refused D' at no charge."""
    p = Policy.from_toml(ADD_REMOVE.format(relation="add_remove"))
    req = ReleaseRequest(epoch=0, metric="x", region="r", cohort=1000)
    for n in (1000, 1001, 10**6):
        assert evaluate(p, req, 10.0 * n, EpochSpend.empty()).prepared is not None, n
    vreq = ReleaseRequest(epoch=0, metric="v", region="r", cohort=100)
    row = np.array([1.0, -0.5, 0.5])
    for n in (100, 101, 10**5):
        assert evaluate(p, vreq, row * n, EpochSpend.empty()).prepared is not None, n
    replace = Policy.from_toml(ADD_REMOVE.format(relation="replace"))  # n public: refused
    assert evaluate(replace, req, 10.0 * 1001, EpochSpend.empty()).prepared is None


def test_a_vector_of_fewer_clients_is_approved_under_add_remove() -> None:
    p = Policy.from_toml(ADD_REMOVE.format(relation="add_remove"))
    req = ReleaseRequest(epoch=0, metric="v", region="r", cohort=100)
    full = np.tile([1.0, -0.5, 0.5], (100, 1))
    for d in (full, full[1:], full[:0]):
        assert evaluate(p, req, d.sum(axis=0), EpochSpend.empty()).prepared is not None


# -- the allocation: plan, check and release agree ---------------------------------------


def test_running_the_readme_tour_again_is_refused_by_the_metrics_allocation(
    tmp_path: Path,
) -> None:
    spatial = Policy.load(SPATIAL)
    request = ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="eu-west", cohort=2400)
    from dpledger import plan

    with Ledger.open(tmp_path / "l.db", spatial, mode="create") as ledger:
        row = next(
            m for m in plan(spatial, {"eu-west": 2400}, ledger=ledger).rows
            if m.metric == "clipped_mean_loss"
        )  # fmt: skip
        assert (row.releases, row.rounds) == (1, 1)
        assert ledger.check(request, 1234.5).approved
        ledger.release(request, 1234.5)
        row = next(
            m for m in plan(spatial, {"eu-west": 2400}, ledger=ledger).rows
            if m.metric == "clipped_mean_loss"
        )  # fmt: skip
        assert (row.releases, row.publishable) == (0, False)
        verdict = ledger.check(request, 1234.5)
        assert [c.name for c in verdict.failures] == ["allocation"]
        with pytest.raises(DpLedgerError, match="allocation"):
            ledger.release(request, 1234.5)
        assert ledger.spent(0, "eu-west").amount == Fraction(1, 5)  # the other four still fit
        other = ReleaseRequest(epoch=0, metric="along_across_ratio", region="eu-west", cohort=2400)
        assert ledger.release(other, 2400.0).charge.amount == Fraction(1, 5)


@pytest.mark.parametrize(
    "call",
    [
        lambda L: L.verify(expected_head=5),
        lambda L: L.verify(expected_head=(1,)),
        lambda L: L.lifetime("north", delta="x"),
        lambda L: L.release_parallel({"north": ReleaseRequest(**GOOD)}),
        lambda L: Ledger.open(L.location, L.policy, labels=5),
        lambda L: ReleaseRequest.model_validate_json("{"),
        lambda L: __import__("dpledger").cohort_floor(1e308, 1e-308, 1e-308),
    ],
    ids=["head int", "head short", "delta", "parallel pair", "labels", "json", "floor"],
)
def test_odd_api_arguments_are_typed_errors(tmp_path: Path, call: object) -> None:
    with Ledger.open(tmp_path / "l.db", policy(), mode="create") as ledger:
        ledger.init()
        with pytest.raises(DpLedgerError):
            call(ledger)  # type: ignore[operator]


def test_numpy_integers_are_accepted_as_epochs_and_cohorts() -> None:
    req = ReleaseRequest(epoch=np.int64(3), metric="loss", region="north", cohort=np.int32(40))
    assert (req.epoch, req.cohort) == (3, 40)
    assert type(req.cohort) is int
    with pytest.raises(InvalidInput):
        ReleaseRequest(epoch=0, metric="loss", region="north", cohort=np.float64(40))


def test_add_remove_refuses_an_overflowing_l1_mass_saying_so() -> None:
    """Review s25: refused with the text of a pass ("L1 mass finite")."""
    p = Policy.from_toml(ADD_REMOVE.format(relation="add_remove"))
    req = ReleaseRequest(epoch=0, metric="v", region="r", cohort=100)
    found = evaluate(p, req, np.array([1e308, -1e308, 1e308]), EpochSpend.empty())
    assert found.prepared is None
    bounds = next(c for c in found.verdict.checks if c.name == "clipping_bounds")
    assert not bounds.passed
    assert "overflows a double" in bounds.reason
