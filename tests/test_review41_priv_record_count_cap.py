"""Review 41 (priv): a record-level confusion matrix is charged at a cap_per_record the
records cannot meet.

:func:`dpledger.metrics.records.record_confusion` adds exactly one count per kept record
(L1 = 1; it takes no cap), and its docs say to release the total with
:func:`dpledger.release_confusion`. A record-level policy declaring ``cap_per_record =
"0.5"`` for that metric was accepted by ``release_confusion``, which charged ε at
Δ = 0.5 · max_records_per_person while one person's record moves the sum by 1: twice the
charged sensitivity under ``add_remove`` (the gross clipping check keeps no bound there).
A public fact (the policy's cap), so it must be refused before the spend.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics import records as rec

HEAD = """
name = "r41-record-cap"
version = "1"
privacy_unit = "record"
max_records_per_person = 1
neighbouring = "add_remove"
definition = "pure"
epoch_epsilon = "4"
[regions]
open = true
"""
POLICY = (
    HEAD
    + """
[metrics.confusion]
kind = "vector_sum"
epsilon = "0.5"
dimension = 4
cap_per_record = "{cap}"
nonnegative = true
"""
)


def _policy(cap: str) -> dl.Policy:
    return dl.Policy.from_toml(POLICY.format(cap=cap))


def _request(cohort: int) -> dl.ReleaseRequest:
    return dl.ReleaseRequest(epoch=1, metric="confusion", region="h1", cohort=cohort)


def test_one_person_moves_the_sum_past_a_cap_below_one() -> None:
    t = np.array([0, 1, 1, 0, 1])
    d = rec.record_confusion(t, t, n_classes=2).total()
    t2 = np.append(t, 1)  # the neighbour: one more person, one record
    d2 = rec.record_confusion(t2, t2, n_classes=2).total()
    moved = float(np.abs(d2 - d).sum())
    assert moved == 1.0
    from dpledger.mechanisms import policy_sensitivity

    assert policy_sensitivity(_policy("0.5"), "confusion") < moved  # the charge's Δ


def test_release_confusion_refuses_a_record_cap_below_one_before_the_spend(tmp_path) -> None:
    path = tmp_path / "l.sqlite"
    t = np.array([0, 1, 1, 0, 1])
    total = rec.record_confusion(t, t, n_classes=2).total()
    with (
        dl.Ledger.open(path, _policy("0.5"), mode="create") as ledger,
        pytest.raises(dl.InvalidInput, match="cap_per_record"),
    ):
        dl.release_confusion(ledger, _request(10), total)
    assert not path.exists()  # nothing charged, no ledger created


def test_release_confusion_accepts_a_record_cap_of_one(tmp_path) -> None:
    t = np.array([0, 1, 1, 0, 1])
    total = rec.record_confusion(t, t, n_classes=2).total()
    with dl.Ledger.open(tmp_path / "l.sqlite", _policy("1"), mode="create") as ledger:
        out = dl.release_confusion(ledger, _request(10), total)
    assert out.release.charge.amount == 0.5


HISTOGRAM = (
    HEAD
    + """
[metrics.stay]
kind = "histogram"
epsilon = "0.5"
edges = [1.0, 7.0]
edges_version = "days/v1"
cap_per_record = "{cap}"
"""
)


def test_a_record_histogram_cap_below_one_is_refused_at_load() -> None:
    """record_histogram also adds one count per record, released by a plain ledger.release
    that cannot tell where the aggregate came from: the policy is the place to refuse
    (docs/privacy-model.md: a histogram cell moves by one count per record)."""
    v = np.array([0.5, 3.0, 9.0])
    moved = float(
        np.abs(
            rec.record_histogram(np.append(v, 2.0), edges=[1.0, 7.0]).total()
            - rec.record_histogram(v, edges=[1.0, 7.0]).total()
        ).sum()
    )
    assert moved == 1.0
    with pytest.raises(dl.PolicyError, match="cap_per_record must be ≥ 1"):
        dl.Policy.from_toml(HISTOGRAM.format(cap="0.5"))
    assert dl.Policy.from_toml(HISTOGRAM.format(cap="1")).metric("stay").cap == 1
