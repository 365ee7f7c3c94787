"""Review 43 (priv): a client's capped row passed its L1 cap by more than the charged slack.

A policy may declare an L1 cap down to 2.2e-308. The client functions scale a row with
more mass than the cap by ``cap / norm`` (``cap_factor``), and ``Segments.counts`` said a
row so scaled "exceeds it by at most 2·2⁻⁵³ relative whatever its sample count". But
``cap / norm`` below the smallest normal double is a subnormal, rounded to the nearest
multiple of 2⁻¹⁰⁷⁴: with a cap of 1e-307 and 10⁶ samples the row's mass was the cap
plus 1.3e-11 of it (2e-11 for the calibration gap), past ``CLIENT_ROUNDING_SLACK``
(1e-12), the only rounding the charged sensitivity allows for. Swapping that client then
moves the sum further than the ledger charged for, and the Flower wrapper's ``PlainSum``
rejects the honest reply — under ``replace`` a published count that depends on the
client's sample count. Deterministic (no noise).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpledger.mechanisms import CLIENT_ROUNDING_SLACK
from dpledger.metrics import flam, spatial

CAP = 1e-307
N = 10**6  # one client's samples
EDGES = [0.5, 1.0, 2.0, 5.0, 10.0, 25.0]
ALLOWED = Fraction(CAP) * (1 + CLIENT_ROUNDING_SLACK)  # what the charge allows one row


def _mass(row: np.ndarray) -> Fraction:
    return sum((Fraction(abs(float(x))) for x in row.reshape(-1)), Fraction(0))


def test_a_histogram_row_stays_within_the_charged_cap() -> None:
    row = spatial.error_histogram(np.full(N, 0.7), edges=EDGES, cap=CAP)
    assert _mass(row) <= ALLOWED


def test_a_confusion_row_stays_within_the_charged_cap() -> None:
    labels = np.zeros(N, dtype=np.int64)
    row = flam.confusion_matrix(labels, labels, n_classes=2, cap=CAP)
    assert _mass(row) <= ALLOWED


def test_a_calibration_gap_row_stays_within_the_charged_cap() -> None:
    row = spatial.calibration_gap(np.full(N, 0.95), np.zeros(N, dtype=np.int64), buckets=5, cap=CAP)
    assert _mass(row) <= ALLOWED


def test_the_flower_aggregator_accepts_the_honest_row() -> None:
    pytest.importorskip("flwr", reason="the flower extra is not installed")
    from dpledger.flower import PlainSum
    from dpledger.flower.plans import metric_plan
    from dpledger.policy import Policy

    policy = Policy.from_toml(
        f"""
name = "tiny-cap"
version = "1"
neighbouring = "replace"
epoch_epsilon = "4"
[regions]
names = ["north"]
[metrics.errors]
kind = "histogram"
epsilon = "1"
edges = {EDGES}
edges_version = "e/v1"
cap_per_client = "1e-307"
""",
        source="tiny.toml",
    )
    plan = metric_plan(policy, "errors", "error_histogram", {})
    row = spatial.error_histogram(np.full(N, 0.7), edges=EDGES, cap=CAP)
    assert PlainSum().check(plan, row.reshape(1, -1)) == [None]
