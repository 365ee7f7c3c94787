"""A confusion matrix under a signed metric: refused on the policy's fact, never the sum's.

Outside audit 5, F4: ``release_confusion`` refused a summed confusion matrix with a
negative cell before its spend, whatever the metric's ``nonnegative`` flag. Under a
signed ``vector_sum`` (the default) a client's negative cell is a valid row, so a sum
whose cell was +0.5 was released and its neighbour at −0.5 refused, uncharged: the
refusal told the cell's sign. The Flower wrapper read its FLAM metrics back by
re-submitting the private sum to ``release_confusion``, so whether they were published
told the same. Now a signed metric is refused for a confusion matrix before any spend
whatever the data, and the wrapper derives the metrics from the committed release.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # read when flwr is imported
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")

import numpy as np
import pytest

import dpledger as dl
from dpledger.errors import InvalidInput
from dpledger.ledger import derived

TOML = """
name = "cm"
version = "1"
neighbouring = "{relation}"
epoch_epsilon = "100"
[regions]
names = ["na"]
[metrics.cm]
kind = "vector_sum"
dimension = 9
cap_per_client = "10"
epsilon = "1"
{flag}
"""
REQ = dl.ReleaseRequest(epoch=0, metric="cm", region="na", cohort=20)


def _total(cell: float) -> np.ndarray:
    return np.array([40.0, 3.0, cell, 2.0, 50.0, 1.0, 0.0, 4.0, 30.0])


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_a_signed_metric_is_refused_alike_for_neighbouring_sums(
    tmp_path: Path, relation: str
) -> None:
    policy = dl.Policy.from_toml(TOML.format(relation=relation, flag=""), source="t")
    said = set()
    for i, cell in enumerate((0.5, -0.5)):  # one client's signed row apart
        with dl.Ledger.open(tmp_path / f"{i}.db", policy, mode="create") as ledger:
            with pytest.raises(InvalidInput, match="declare it nonnegative = true") as e:
                dl.release_confusion(ledger, REQ, _total(cell))
            said.add(str(e.value))
        assert not (tmp_path / f"{i}.db").exists()  # nothing created, nothing charged
    assert len(said) == 1  # the same words for both: nothing about the sum


def test_a_nonnegative_metric_releases_and_derives_from_the_release(tmp_path: Path) -> None:
    flag = "nonnegative = true"
    policy = dl.Policy.from_toml(TOML.format(relation="replace", flag=flag), source="t")
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        out = dl.release_confusion(ledger, REQ, _total(0.5))
    again = derived.derive_confusion(out.release, 10.0 * REQ.cohort)
    # The noise is unseeded: at ε = 1 the noisy total is sometimes ≤ 0 and a ratio is
    # NaN (flagged unusable in its interval). The same NaN is the same derivation.
    assert dict(again.metrics) == pytest.approx(dict(out.metrics), rel=0, abs=0, nan_ok=True)
    assert again.intervals == out.intervals


def test_the_flower_plan_refuses_a_signed_confusion_metric() -> None:
    pytest.importorskip("flwr", reason="the flower extra is not installed")
    from dpledger.flower import plans

    policy = dl.Policy.from_toml(TOML.format(relation="replace", flag=""), source="t")
    with pytest.raises(InvalidInput, match="nonnegative = true"):
        plans.metric_plan(policy, "cm", "confusion_matrix", {"n_classes": 3})
    ok = dl.Policy.from_toml(TOML.format(relation="replace", flag="nonnegative = true"), source="t")
    assert plans.metric_plan(ok, "cm", "confusion_matrix", {"n_classes": 3}).nonnegative


def test_an_unknown_metric_is_refused_alike_whatever_the_signs(tmp_path: Path) -> None:
    """Review s27b, M3: for an unknown metric a +0.5 cell gave PolicyMismatch and a −0.5
    cell InvalidInput: the error's type told the sign (nothing was released)."""
    flag = "nonnegative = true"
    policy = dl.Policy.from_toml(TOML.format(relation="replace", flag=flag), source="t")
    unknown = REQ.model_copy(update={"metric": "nope"})
    kinds = set()
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        for cell in (0.5, -0.5):
            with pytest.raises(dl.DpLedgerError) as e:
                dl.release_confusion(ledger, unknown, _total(cell))
            kinds.add(type(e.value))
    assert len(kinds) == 1
