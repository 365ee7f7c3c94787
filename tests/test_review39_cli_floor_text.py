"""Review 39 (CLI): the cohort-floor refusal read "ci95 bar 1 > target 1".

``dpledger check`` (and notebook 02's output) printed the refused release's bar with 4
significant digits: at n = floor − 1 of ``error_histogram`` (spatial-eval, floor 1199)
the bar is 1.0004, shown "1 > target 1", a reason that contradicts itself in a pasted
review. The bar is now shown with as many digits as tell it from the target.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import dpledger as dl

SPATIAL = Path(__file__).resolve().parents[1] / "policies" / "spatial-eval.toml"


def test_refused_floor_reason_shows_bar_apart_from_target(tmp_path):
    policy = dl.Policy.load(SPATIAL)
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        for metric, n in (("error_histogram", 1198), ("calibration_gap", 1198)):
            spec = policy.metric(metric)
            request = dl.ReleaseRequest(
                epoch=0, metric=metric, region="na", cohort=n, edges_version=spec.edges_version
            )
            verdict = ledger.check(request, np.zeros(spec.size))
            check = next(c for c in verdict.checks if c.name == "cohort_floor")
            assert check.status == "FAIL"
            m = re.search(r"bar (\S+) > target (\S+);", check.reason)
            assert m is not None, check.reason
            assert float(m.group(1)) > float(m.group(2)), check.reason


def test_passing_reason_keeps_four_digits(tmp_path):
    policy = dl.Policy.load(SPATIAL)
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        request = dl.ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="na", cohort=2400)
        verdict = ledger.check(request, 0.0)
    check = next(c for c in verdict.checks if c.name == "cohort_floor")
    assert check.reason == "n=2400 clients ≥ floor 510 (ci95 bar 0.02122 ≤ 0.1)"
