"""Review h39 (statistics): the bar the approval check and the planner compare with a target
is the bar a release prints, bit for bit.

The approval check and ``plan`` computed ``(f·b + grid)/n + magnitude·ROUNDING``; a
release ``(f·b + (grid + n·magnitude·ROUNDING))/n``: equal in reals, an ulp apart in
doubles at 304 of the cohorts 500..2,999 of the shipped clipped_mean_loss. With a target
equal to the planned bar at such a cohort (n = 544), the floor is 544, a release at 544 is
approved, and it printed a bar above its policy's target. Deterministic.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from factories import SPATIAL

import dpledger as dl
from dpledger import mechanisms as mech


def test_release_bar_is_the_planned_bar_and_meets_the_target_at_the_floor(
    tmp_path: Path,
) -> None:
    shipped = dl.Policy.load(SPATIAL)
    facts, _ = mech.mechanism_facts(shipped, "clipped_mean_loss")
    spec = shipped.metric("clipped_mean_loss")
    n = 544
    target = mech.error_bar_of(facts, n, spec.bar, spec.magnitude)
    assert mech.cohort_floor_of(facts, target, spec.bar, spec.magnitude) == n
    text = SPATIAL.read_text().replace("target = 0.1 ", f"target = {target!r} ", 1)
    policy = dl.Policy.from_toml(text, source="spatial-target.toml")
    assert policy.metric("clipped_mean_loss").target == target
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        request = dl.ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="eu-west", cohort=n)
        release = ledger.release(request, 1.0 * n)
        assert release.error_bar == target
        assert release.error_bar <= policy.metric("clipped_mean_loss").target
        hist = policy.metric("error_histogram")
        planned = dl.plan(policy, cohorts={"eu-west": 3000}).rows
        row = next(r for r in planned if r.metric == "error_histogram")
        req = dl.ReleaseRequest(
            epoch=0, metric="error_histogram", region="eu-west", cohort=3000,
            edges_version=hist.edges_version,
        )  # fmt: skip
        vector = ledger.release(req, np.full(hist.size, 1.0))
    # a vector's release prints its bar on each count (a sum): the plan's per-client bar
    # is that over n, in the mean's own arithmetic (monotone in n: review 40), so the two
    # agree to an ulp, not bit for bit
    assert vector.error_bar == vector.half_width(mech.bar_factor("ci95", vector.facts.mechanism))
    assert abs(vector.error_bar / 3000 - row.error_bar) <= np.spacing(row.error_bar)
    assert row.error_bar <= hist.target
