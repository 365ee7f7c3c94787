"""Review h39 (statistics): ``dl.cohort_floor`` / ``dl.error_bar`` near OpenDP's grid.

They read the closed form Δ/ε, but a release is calibrated to OpenDP's map, which charges
the input's rounding onto the 2**-40 grid on top of Δ: at Δ = 1e-9 (ε = 1) the scale is
0.09% above Δ/ε, at 1e-12 about twice it. ``dl.cohort_floor`` then named cohorts the
ledger refuses (2,998 against the ledger's floor 3,001; 49 against 76) and ``dl.error_bar``
a bar below the one a release prints. (stats6 F-PLAN fixed the same for
``budget_for_target``.) Deterministic.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from _stores import SMALL_HEAD

import dpledger as dl
from dpledger import mechanisms as mech

POLICY = (
    SMALL_HEAD.format(name="tiny")
    + """[metrics.m]
kind = "scalar_mean"
epsilon = "1"
target = {target}
clip = {{ low = "0", high = "{high}", source = "test: a clip width near OpenDP's grid" }}
"""
)


@pytest.mark.parametrize(("high", "target"), [(1e-9, 1e-12), (1e-12, 1e-13), (3.4, 0.1)])
def test_cohort_floor_is_the_ledgers_floor_and_error_bar_its_bar(
    tmp_path: Path, high: float, target: float
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        policy = dl.Policy.from_toml(POLICY.format(high=high, target=target), source="t.toml")
    facts, _ = mech.mechanism_facts(policy, "m")
    floor = dl.cohort_floor(high, 1.0, target)
    assert floor == dl.plan(policy, cohorts={"a": 10}).rows[0].cohort_floor
    # what a release at that cohort prints (within the ledger's relative client slack)
    assert dl.error_bar(high, 1.0, floor) == pytest.approx(mech.error_bar_of(facts, floor))
    assert dl.error_bar(high, 1.0, floor) <= target
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        request = dl.ReleaseRequest(epoch=0, metric="m", region="a", cohort=floor)
        release = ledger.release(request, 0.5 * high * floor)
    assert release.error_bar == pytest.approx(dl.error_bar(high, 1.0, floor), rel=1e-9)
