"""Review 40 (silo): ``compare_units``' client-level twin scaled a scalar clip [low, high]
to [m·low, m·high] (m the largest silo's record count). A silo sums 1 to m records, so
when the clip excludes 0 a smaller silo's sum lies below m·low: with a rating clip [1, 5]
and silos of 1 and 200 records the twin's clip was [200, 1000], which the one-record
silo's sum (≥ 1) misses — the twin did not "keep every record", and under ``replace`` its
Δ (m·(high − low) = 800) understated the client-level noise (the twin needs
max(m·high) − min(low) = 999), so the client bar in ``plan --compare-units`` looked
smaller than the client unit can deliver. Deterministic."""

from __future__ import annotations

from fractions import Fraction

import pytest

import dpledger as dl
from dpledger.planning.units import client_twin, compare_units

POLICY = """
name = "ratings"
version = "1"
privacy_unit = "record"
max_records_per_person = 1
neighbouring = "{neighbouring}"
epoch_epsilon = "4"
allocation = "pooled"
[regions]
names = ["a", "b"]
[metrics.rating]
kind = "scalar_mean"
epsilon = "1"
target = 0.1
clip = {{ low = "{low}", high = "{high}", source = "a 1-5 rating" }}
"""


def _policy(neighbouring: str, low: str = "1", high: str = "5") -> dl.Policy:
    return dl.Policy.from_toml(POLICY.format(neighbouring=neighbouring, low=low, high=high))


def test_the_twin_clip_holds_every_silo_sum_of_one_to_m_records() -> None:
    twin = client_twin(_policy("replace"), 200)
    clip = twin.metric("rating").clip
    assert clip is not None
    for records in (1, 2, 199, 200):  # every record at the low edge, then at the high one
        assert clip.low <= records * 1
        assert records * 5 <= clip.high
    assert (clip.low, clip.high) == (Fraction(1), Fraction(1000))


def test_replace_twin_sensitivity_covers_a_one_record_silo_replaced_by_a_full_one() -> None:
    rows = compare_units(_policy("replace"), {"a": 1, "b": 200})
    change = 200 * 5 - 1 * 1  # silo a (one record at 1) vs a silo of 200 records at 5
    assert rows[0].client_sensitivity >= change


@pytest.mark.parametrize(("low", "high"), [("0", "30"), ("-2", "3"), ("-5", "-1")])
def test_add_remove_and_clips_with_zero_are_unchanged(low: str, high: str) -> None:
    m = 40
    twin = client_twin(_policy("add_remove", low, high), m)
    clip = twin.metric("rating").clip
    assert clip is not None
    lo, hi = Fraction(low), Fraction(high)
    assert (clip.low, clip.high) == (min(lo, m * lo), max(hi, m * hi))
    rows = compare_units(_policy("add_remove", low, high), {"a": 3, "b": m})
    assert rows[0].client_sensitivity == pytest.approx(m * float(max(abs(lo), abs(hi))))
