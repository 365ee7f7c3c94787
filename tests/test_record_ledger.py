"""A record-level ledger: silos compose in parallel, entries carry their unit, epochs keep one.

Regions are silos (disjoint records): a release about one silo costs nothing to another
silo's records; a release over all silos costs its ε to every record. Every entry
records its privacy unit in its chain-hashed mechanism facts; ``verify`` checks it
against the entry's recorded policy; a client-level entry hashes as it did before units.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from factories import policy

import dpledger as dl
from dpledger import ALL, CohortTooSmall, InvalidAggregate, Ledger, PolicyMismatch, ReleaseRequest
from dpledger import mechanisms as mech
from dpledger.ledger.records import chain_hash

RECORD = """
name = "test-policy"
version = "{version}"
privacy_unit = "record"
max_records_per_person = {k}
neighbouring = "{neighbouring}"
epoch_epsilon = "4"
allocation = "pooled"
[regions]
names = ["north", "south", "east"]
[metrics.loss]
kind = "scalar_mean"
epsilon = "0.1"
target = 0.1
clip = {{ low = "0", high = "2", source = "test" }}
[metrics.hist5]
kind = "histogram"
epsilon = "0.5"
edges = [1.0, 2.0, 3.0, 4.0]
edges_version = "h5/v1"
cap_per_record = "1"
"""


def record_policy(k: int = 2, neighbouring: str = "add_remove", version: str = "2") -> dl.Policy:
    return dl.Policy.from_toml(RECORD.format(k=k, neighbouring=neighbouring, version=version))


def req(metric: str, region: str, cohort: int = 5000, epoch: int = 0) -> ReleaseRequest:
    edges = "h5/v1" if metric == "hist5" else None
    return ReleaseRequest(
        epoch=epoch, metric=metric, region=region, cohort=cohort, edges_version=edges
    )


def test_a_release_about_one_silo_costs_nothing_to_another_silos_records(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "r.db", record_policy(), mode="create") as ledger:
        ledger.release(req("hist5", "north"), [1000.0, 1000, 1000, 1000, 1000])
        assert ledger.spent(0, "north").amount == Fraction(1, 2)
        assert ledger.spent(0, "south").amount == 0
        ledger.release(req("loss", ALL), 5000.0)  # over every silo: every record pays
        assert ledger.spent(0, "north").amount == Fraction(6, 10)
        assert ledger.spent(0, "south").amount == Fraction(1, 10)
        assert ledger.spent(0).amount == Fraction(6, 10)  # the worst silo's records
        assert ledger.verify().ok


def test_sensitivity_and_floor_are_in_records_times_the_person_bound(tmp_path: Path) -> None:
    p = record_policy(k=3)
    facts, _ = mech.mechanism_facts(p, "hist5")
    assert facts.sensitivity == pytest.approx(3.0)  # add_remove: k records of one count each
    with Ledger.open(tmp_path / "r.db", p, mode="create") as ledger:
        r = ledger.release(req("hist5", "north", cohort=50), [10.0, 10, 10, 10, 10])
        assert r.facts.privacy_unit == "record"
        assert r.scale == pytest.approx(3.0 / 0.5)
        with pytest.raises(CohortTooSmall, match="records < floor"):
            ledger.release(req("loss", "north", cohort=50), 40.0)
        # the record count is private (add_remove): a mass beyond 1 × 50 planned records
        # passes (a refusal would tell 50 records from 51), a negative count never does
        ledger.release(req("hist5", "south", cohort=50), [60.0, 0, 0, 0, 0])
        with pytest.raises(InvalidAggregate, match="negative"):
            ledger.release(req("hist5", "east", cohort=50), [-1.0, 0, 0, 0, 0])


def test_every_entry_records_its_unit_and_verify_checks_it_against_the_policy(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.db"
    with Ledger.open(path, record_policy(), mode="create") as ledger:
        ledger.release(req("hist5", "north"), [1.0, 2, 3, 4, 5])
        ledger.release(req("hist5", "south"), [1.0, 2, 3, 4, 5])
        entries = ledger.entries()
        assert [e.privacy_unit for e in entries] == ["record", "record"]
        assert entries[0].as_dict()["privacy_unit"] == "record"
        assert entries[0].as_dict()["records_per_unit"] == 2
        assert ledger.verify().ok
    # an attacker re-records entry 2 as client-level and re-chains every hash after it
    con = sqlite3.connect(path)
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
        con.execute(f"DROP TRIGGER {name}")
    prev = entries[0].hash
    forged = dataclasses.replace(entries[1].draft.facts, privacy_unit="client", records=1)
    draft = dataclasses.replace(entries[1].draft, facts=forged)
    h = chain_hash(2, entries[1].created_at, draft, prev)
    con.execute(
        "UPDATE dpl_entries SET mechanism = ?, hash = ? WHERE seq = 2", (forged.as_json(), h)
    )
    con.execute("UPDATE dpl_meta SET value = ? WHERE key = 'head_hash'", (h,))
    con.commit()
    con.close()
    with Ledger.open(path, record_policy(), mode="read") as ledger:
        report = ledger.verify()
    assert not report.ok
    assert any(
        "entry 2: recorded for privacy unit 'client' but its policy 2 declares 'record' (≤ 2" in p
        for p in report.problems
    ), report.problems


def test_a_client_level_entry_stores_no_unit_so_old_ledgers_hash_unchanged(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.db"
    with Ledger.open(path, policy(), mode="create") as ledger:
        ledger.release(ReleaseRequest(epoch=0, metric="loss", region="north", cohort=100), 50.0)
        (entry,) = ledger.entries()
    con = sqlite3.connect(path)
    (stored,) = con.execute("SELECT mechanism FROM dpl_entries").fetchone()
    con.close()
    assert set(json.loads(stored)) == {
        "mechanism", "measure", "sensitivity", "scale", "dimension", "opendp_version", "k",
    }  # fmt: skip
    assert entry.privacy_unit == "client"
    assert entry.hash == chain_hash(entry.seq, entry.created_at, entry.draft, entry.prev_hash)


def test_an_epoch_never_mixes_units(tmp_path: Path) -> None:
    path = tmp_path / "mixed.db"
    with Ledger.open(path, policy(version="1"), mode="create") as ledger:
        ledger.release(ReleaseRequest(epoch=0, metric="loss", region="north", cohort=100), 50.0)
    with Ledger.open(path, record_policy(version="2"), mode="write") as ledger:
        with pytest.raises(PolicyMismatch, match="an epoch never mixes units"):
            ledger.release(req("loss", "north", epoch=0), 50.0)
        ledger.release(req("loss", "north", epoch=1), 50.0)  # a new epoch may change unit
        assert ledger.verify().ok
        client = ledger.lifetime("north", privacy_unit="client")
        person = ledger.lifetime("north")  # the policy's unit: record
    assert (client.releases, client.unbounded, client.privacy_unit) == (1, 1, "client")
    assert (person.releases, person.unbounded, person.privacy_unit) == (2, 0, "record")
    assert person.total.amount == 2 * client.total.amount


def test_the_plan_agrees_with_what_the_ledger_charges(tmp_path: Path) -> None:
    p = record_policy(k=2)
    plan = dl.plan(p, {"north": 4000, "south": 100})
    assert (plan.privacy_unit, plan.counted, plan.max_records_per_person) == (
        "record",
        "records",
        2,
    )
    assert "n records" in plan.table()
    assert "budget per person" in plan.table()
    with Ledger.open(tmp_path / "r.db", p, mode="create") as ledger:
        for row in plan.rows:
            request = req(row.metric, row.region, cohort=row.cohort)
            aggregate = 1.0 if row.metric == "loss" else [1.0, 1, 1, 1, 1]
            verdict = ledger.check(request, aggregate)
            assert verdict.approved == row.publishable, (row, verdict.summary())
            assert verdict.floor == row.cohort_floor
            if verdict.approved:
                r = ledger.release(request, aggregate)
                per_record = r.error_bar if row.kind == "scalar_mean" else r.error_bar / row.cohort
                assert (r.charge, r.scale) == (row.budget_per_release, row.noise_scale)
                assert per_record == pytest.approx(row.error_bar, rel=1e-15)


def test_compare_units_shows_the_ratio_of_the_largest_silo_to_the_person_bound() -> None:
    from dpledger.planning.units import client_twin, compare_units, units_table

    p = record_policy(k=2, neighbouring="replace")
    rows = compare_units(p, {"north": 300, "south": 1200, "east": 50})
    by = {r.metric: r for r in rows}
    assert by["hist5"].ratio == pytest.approx(1200 / 2)  # cap_per_client = 1200 × 1; Δ_rec = 2·1
    assert by["hist5"].records == 1550
    assert by["loss"].client_sensitivity == pytest.approx(1200 * 2)
    twin = client_twin(p, 1200)
    assert twin.privacy_unit == "client"
    assert twin.metric("hist5").cap_per_client == 1200
    text = units_table(rows)
    assert "client-level: one client's whole contribution" in text
    assert "a silo's aggregate statistics are not" in text
    with pytest.raises(dl.InvalidInput, match="record-level policy"):
        compare_units(policy(), {"a": 3})


def test_a_release_request_cohort_under_add_remove_is_the_planned_record_count(
    tmp_path: Path,
) -> None:
    """The planned count is not a bound on the private one: more records than planned pass
    (audit 3), and the bounds check says why, naming public facts only."""
    with Ledger.open(tmp_path / "r.db", record_policy(), mode="create") as ledger:
        v = ledger.check(req("hist5", "north", cohort=10), np.array([11.0, 0, 0, 0, 0]))
    assert v.approved
    reason = next(c.reason for c in v.checks if c.name == "clipping_bounds")
    assert "the count is private" in reason
    assert "11" not in reason
