"""Review 40 (spatial intervals): the demo report's UNUSABLE line states the interval's own reason.

The text report printed "> 25 m: unusable (the noisy total count is not clearly positive)"
(and "top-bucket gap: unusable (its noisy count is not clearly positive)") whenever
``share_interval`` flagged the share, whatever the reason. A share is also flagged when
its Fieller interval lies wholly outside [0, 1] — e.g. a true tail share of 0 (a healthy
region: no error past 25 m) whose tail count drew noise of −3.5 scales. Measured with
real OpenDP noise on the shipped policy (total at 20–27 noise scales, far above its guard):
about 1 release in 250–1,000; the report then told the reader the total was not clearly
positive while it was 20+ noise s.e. clear. Deterministic: the noisy vector is fixed on a
real release (``dataclasses.replace``), no sampling.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from factories import SPATIAL

import dpledger as dl
from dpledger.sim.demo import _derive, share_interval
from dpledger.sim.report import _value_cell


def _release(tmp_path: Path, metric: str, vector: np.ndarray, cohort: int) -> dl.Release:
    policy = dl.Policy.load(SPATIAL)
    spec = policy.metric(metric)
    with dl.Ledger.open(tmp_path / f"{metric}.db", policy, mode="create") as ledger:
        req = dl.ReleaseRequest(epoch=0, metric=metric, region="na", cohort=cohort,
                                edges_version=spec.edges_version)  # fmt: skip
        return ledger.release(req, vector)


def test_a_tail_share_flagged_for_its_range_does_not_blame_a_clear_total(tmp_path: Path) -> None:
    rel = _release(tmp_path, "error_histogram", np.full(7, 100.0), cohort=3000)
    b = rel.scale
    noisy = np.array([60 * b, 40 * b, 20 * b, 10 * b, 5 * b, 2 * b, -3.5 * b])
    rel = dataclasses.replace(rel, noisy_sum=noisy)
    iv = share_interval(rel, -1, slice(None), (0.0, 1.0), "total count")
    assert not iv.usable
    assert iv.reason is not None
    assert "not clearly positive" not in iv.reason  # the total is ~130 scales clear
    cell = _value_cell(rel, _derive(rel))
    assert "not clearly positive" not in cell, cell
    assert iv.reason in cell, cell


def test_a_top_gap_flagged_for_its_range_does_not_blame_a_clear_count(tmp_path: Path) -> None:
    rel = _release(tmp_path, "calibration_gap", np.zeros(10), cohort=3000)
    b = rel.scale
    noisy = np.zeros(10)
    noisy[9] = 40 * b  # the top bucket's count: far above its guard (~3 scales)
    noisy[4] = 40 * b + 12 * b  # Σ(p − y) above the count: the gap's interval is above 1
    rel = dataclasses.replace(rel, noisy_sum=noisy)
    iv = share_interval(rel, 4, -1, (-1.0, 1.0), "top bucket's count")
    assert not iv.usable
    assert iv.reason is not None
    assert "not clearly positive" not in iv.reason
    cell = _value_cell(rel, _derive(rel))
    assert "not clearly positive" not in cell, cell
    assert iv.reason in cell, cell
