"""Record-level policies and the silo side: declared units, unchanged hashes, the person bound."""

from __future__ import annotations

import numpy as np
import pytest
from factories import ROOT, policy, spatial

from dpledger import InvalidInput, Policy, PolicyError
from dpledger import mechanisms as mech
from dpledger.metrics import flam
from dpledger.metrics import records as rec

CROSS_SILO = ROOT / "policies" / "cross-silo.toml"

RECORD = """
name = "rec"
version = "1"
privacy_unit = "record"
{bound}
neighbouring = "add_remove"
epoch_epsilon = "4"
[regions]
names = ["a", "b"]
[metrics.m]
kind = "vector_sum"
epsilon = "0.5"
dimension = 4
{cap}
"""


def _record(bound: str = "max_records_per_person = 3", cap: str = 'cap_per_record = "1"') -> Policy:
    return Policy.from_toml(RECORD.format(bound=bound, cap=cap))


def test_existing_policy_hashes_are_unchanged_by_the_new_fields() -> None:
    """Ledgers bind epochs to these hashes: the record-level fields must not move them."""
    assert spatial().content_hash == (
        "acab798c32bc273394ee50d78e04d70efa488294aec9662529bf3802702056ec"
    )
    assert policy().content_hash == (
        "1636843b9075d5a92cece7a6fc7be2734a5b18948a96f6fad466a62fee8e6c9f"
    )
    assert policy(neighbouring="add_remove").content_hash == (
        "fb6343af16be56f653c69224c66a767056dd949cac29e92c1620ed4393d38161"
    )


def test_a_record_policy_hashes_its_person_bound() -> None:
    assert _record().content_hash != _record("max_records_per_person = 4").content_hash
    assert _record().privacy_unit == "record"
    assert _record().records_per_unit == 3
    assert _record().counted == "records"
    assert spatial().records_per_unit == 1
    assert spatial().counted == "clients"


@pytest.mark.parametrize(
    ("bound", "cap", "message"),
    [
        ("", 'cap_per_record = "1"', "needs max_records_per_person"),
        ("max_records_per_person = 0", 'cap_per_record = "1"', "max_records_per_person"),
        ('max_records_per_person = "2"', 'cap_per_record = "1"', "max_records_per_person"),
        ("max_records_per_person = 2.0", 'cap_per_record = "1"', "max_records_per_person"),
        ("max_records_per_person = true", 'cap_per_record = "1"', "max_records_per_person"),
        ("max_records_per_person = 2", 'cap_per_client = "1"', "cap_per_record, not"),
        ("max_records_per_person = 2", "", "one L1 bound"),
        ("max_records_per_person = 2", 'cap_per_record = "1"\ncap_per_client = "1"', "one L1"),
    ],
)
def test_a_record_policy_declares_its_bound_and_per_record_caps(
    bound: str, cap: str, message: str
) -> None:
    with pytest.raises(PolicyError, match=message):
        _record(bound, cap)


def test_a_client_policy_refuses_record_declarations() -> None:
    text = RECORD.replace('privacy_unit = "record"', 'privacy_unit = "client"')
    with pytest.raises(PolicyError, match="belongs to a privacy_unit = 'record'"):
        Policy.from_toml(text.format(bound="max_records_per_person = 1", cap='cap_per_client="1"'))
    with pytest.raises(PolicyError, match="cap_per_record, y_clip and y_pred_clip belong"):
        Policy.from_toml(text.format(bound="", cap='cap_per_record = "1"'))
    with pytest.raises(PolicyError, match="privacy_unit"):
        Policy.from_toml(text.replace('"client"', '"person"').format(bound="", cap="x=1"))


def test_regression_clips_come_in_pairs_on_the_codec_layout() -> None:
    clip = '{ low = "0", high = "1", source = "t" }'
    with pytest.raises(PolicyError, match="both y_clip and y_pred_clip"):
        _record(cap=f'cap_per_record = "1"\ny_clip = {clip}')
    with pytest.raises(PolicyError, match="dimension 5"):
        _record(cap=f'cap_per_record = "1"\ny_clip = {clip}\ny_pred_clip = {clip}')


def test_the_shipped_cross_silo_policy_charges_per_record() -> None:
    p = Policy.load(CROSS_SILO)
    assert (p.privacy_unit, p.max_records_per_person, p.neighbouring) == ("record", 1, "add_remove")
    assert len(p.regions.names) == 20
    facts, charge = mech.mechanism_facts(p, "digits_confusion")
    assert (facts.privacy_unit, facts.records, charge) == ("record", 1, 1 / 2)
    assert facts.sensitivity == pytest.approx(1.0)  # one record is one count
    codec = p.metric("diabetes_regression").record_regression_codec()
    assert codec.cap == 1.0
    assert codec.bounds[1] == pytest.approx(346 - 25)  # the residual bound from the two clips
    with pytest.raises(InvalidInput, match="record-level regression"):
        p.metric("digits_confusion").record_regression_codec()


def test_facts_json_names_the_unit_only_when_it_is_not_client() -> None:
    client, _ = mech.mechanism_facts(spatial(), "error_histogram")
    assert "privacy_unit" not in client.as_json()  # entries from before units hash as before
    record, _ = mech.mechanism_facts(_record(), "m")
    assert record.as_dict()["privacy_unit"] == "record"
    assert record.as_dict()["records"] == 3
    assert mech.MechanismFacts.from_dict(record.as_dict()) == record
    assert mech.MechanismFacts.from_dict(client.as_dict()) == client
    with pytest.raises(InvalidInput, match="one element per client"):
        mech.MechanismFacts.from_dict({**client.as_dict(), "records": 2})


# -- the silo side --------------------------------------------------------------------------


def test_each_person_keeps_their_first_k_records_in_listed_order() -> None:
    persons = np.array([5, 9, 5, 5, 9, 2, 5])
    keep = rec.keep_per_person(persons, 2)
    assert keep.tolist() == [True, True, True, False, True, True, False]
    # per silo: the same person in two silos is bounded in each
    keep = rec.keep_per_person(persons, 1, offsets=np.array([0, 3]))
    assert keep.tolist() == [True, True, False, True, True, True, False]
    assert rec.keep_per_person(np.array(["x", "y", "x"]), 1).tolist() == [True, True, False]


def test_a_persons_kept_records_do_not_depend_on_other_people() -> None:
    rng = np.random.default_rng(3)
    persons = rng.integers(0, 40, size=500)
    keep = rec.keep_per_person(persons, 3)
    for trial in range(5):  # drop a random half of everyone else's records, reorder nothing
        others_kept = (persons != 7) & (rng.random(500) < 0.5)
        subset = np.flatnonzero((persons == 7) | others_kept)
        sub_keep = rec.keep_per_person(persons[subset], 3)
        assert sub_keep[persons[subset] == 7].tolist() == keep[persons == 7].tolist(), trial
    assert keep[persons == 7].sum() == min(3, int((persons == 7).sum()))


def test_record_confusion_sums_equal_the_centralised_matrix() -> None:
    rng = np.random.default_rng(0)
    t, p = rng.integers(0, 4, 300), rng.integers(0, 4, 300)
    sums = rec.record_confusion(t, p, n_classes=4, offsets=np.array([0, 10, 10, 200]))
    assert sums.sums.shape == (4, 16)
    assert sums.records.tolist() == [10, 0, 190, 100]
    central = flam.flatten_confusion(flam.confusion_matrix(t, p, n_classes=4))
    np.testing.assert_array_equal(sums.total(), central)
    np.testing.assert_array_equal(sums.total([0, 2]) + sums.total([1, 3]), central)


def test_the_person_bound_needs_ids_and_ids_need_the_bound() -> None:
    t = np.zeros(3, dtype=np.int64)
    with pytest.raises(InvalidInput, match="needs persons"):
        rec.record_confusion(t, t, n_classes=2, max_records=2)
    with pytest.raises(InvalidInput, match="without max_records"):
        rec.record_confusion(t, t, n_classes=2, persons=np.arange(3))
    with pytest.raises(InvalidInput, match="one id per record"):
        rec.record_confusion(t, t, n_classes=2, persons=np.arange(2), max_records=1)
    with pytest.raises(InvalidInput, match="max_records must be ≥ 1"):
        rec.keep_per_person(np.arange(3), 0)
    dropped = rec.record_confusion(t, t, n_classes=2, persons=np.zeros(3, int), max_records=2)
    assert (dropped.records.tolist(), dropped.dropped.tolist()) == ([2], [1])


def test_record_scalar_and_regression_sums_are_exact_on_their_grid() -> None:
    v = np.array([0.1] * 1000 + [1e300, -5.0])
    sums = rec.record_scalar(v, low=0.0, high=30.0)
    q = sums.quantum
    assert sums.total()[0] == pytest.approx(100.0 + 30.0, rel=1e-6)
    assert float(sums.total()[0] / q).is_integer()
    y, yh = np.array([30.0, 500.0, 10.0]), np.array([20.0, 100.0, -1e9])
    reg = rec.record_regression(y, yh, y_clip=(25, 346), y_pred_clip=(25, 346), cap=1.0)
    codec = rec.record_regression_codec(y_clip=(25, 346), y_pred_clip=(25, 346), cap=1.0)
    measures = codec.decode(reg.total())
    assert measures[4] == pytest.approx(3.0, rel=1e-6)  # n
    assert measures[1] == pytest.approx(5 + 246 + 0, rel=1e-6)  # |y−ŷ| after both clips
