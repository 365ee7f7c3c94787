"""Review 40 (planning): ``dl.cohort_floor`` / ``dl.error_bar`` could only plan a scalar.

They calibrate the noise of a *scalar* release of Δ at the budget; a vector or histogram
release of d values is calibrated by OpenDP's map, which charges every coordinate's
rounding onto the 2**-40 grid, so near the grid its scale is far above the scalar's. A
planner reading a plan row of a vector (``dl.cohort_floor(row.sensitivity,
row.budget_per_release, target)``, as notebook 02 does for its histograms) got 5,997 where
the ledger's floor for a vector of 1000 values at cap 1e-9 (ε = 1) is 8,718, and a bar
below the one the release prints. Both now take ``dimension`` (0, a scalar, by default).
Deterministic.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import dpledger as dl
from dpledger.errors import InvalidInput

POLICY = """
name = "v"
version = "1"
neighbouring = "{nb}"
definition = "{definition}"
epoch_{unit} = "4"
eval_fraction = "0.25"
{delta}
[regions]
names = ["a"]
[metrics.m]
kind = "{kind}"
{unit} = "1"
{shape}
cap_per_client = "{cap}"
target = {target}
"""


def _policy(definition: str, kind: str, nb: str, cap: str, target: float) -> dl.Policy:
    unit = "epsilon" if definition == "pure" else "rho"
    shape = (
        "dimension = 1000\nnonnegative = true"
        if kind == "vector_sum"
        else "edges = [1.0, 2.0, 3.0]\nedges_version = 'h'"
    )
    text = POLICY.format(
        nb=nb, definition=definition, unit=unit, kind=kind, shape=shape, cap=cap, target=target,
        delta="" if definition == "pure" else "delta = 1e-6",
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dl.Policy.from_toml(text, source="t.toml")


@pytest.mark.parametrize("nb", ["replace", "add_remove"])
@pytest.mark.parametrize(
    ("definition", "kind", "cap", "target"),
    [
        ("pure", "vector_sum", "1e-9", 1e-12),
        ("zcdp", "vector_sum", "1e-12", 1e-15),
        ("pure", "histogram", "1e-12", 1e-14),
        ("pure", "vector_sum", "1", 1e-3),
    ],
)
def test_floor_and_bar_of_a_vector_are_the_ledgers(
    tmp_path: Path, definition: str, kind: str, nb: str, cap: str, target: float
) -> None:
    policy = _policy(definition, kind, nb, cap, target)
    row = dl.plan(policy, cohorts={"a": 10}).rows[0]
    size = policy.metric("m").size
    budget = row.budget_per_release
    mechanism = policy.mechanism("m")
    floor = dl.cohort_floor(row.sensitivity, budget, target, mechanism=mechanism, dimension=size)
    assert floor == row.cohort_floor
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        for n, ok in ((floor, True), (floor - 1, False)):
            request = dl.ReleaseRequest(
                epoch=0,
                metric="m",
                region="a",
                cohort=n,
                edges_version=policy.metric("m").edges_version,
            )
            verdict = ledger.check(request, np.zeros(size))
            assert next(c for c in verdict.checks if c.name == "cohort_floor").passed is ok
        request = dl.ReleaseRequest(
            epoch=0,
            metric="m",
            region="a",
            cohort=floor,
            edges_version=policy.metric("m").edges_version,
        )
        release = ledger.release(request, np.zeros(size))
    bar = dl.error_bar(row.sensitivity, budget, floor, mechanism=mechanism, dimension=size)
    assert bar == pytest.approx(release.error_bar / floor, rel=1e-12, abs=0)  # the sum's bar


@pytest.mark.parametrize("dimension", [-1, 100_001, True, 2.0, "10", None])
def test_a_bad_dimension_is_refused(dimension: object) -> None:
    with pytest.raises(InvalidInput, match="dimension must be 0"):
        dl.cohort_floor(1.0, 1.0, 0.1, dimension=dimension)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="dimension must be 0"):
        dl.error_bar(1.0, 1.0, 10, dimension=dimension)  # type: ignore[arg-type]


def test_dimension_zero_is_the_scalar_and_numpy_integers_read_as_numbers() -> None:
    assert dl.cohort_floor(3.4, 0.2, 0.1) == dl.cohort_floor(3.4, 0.2, 0.1, dimension=0)
    assert dl.error_bar(1e-9, 1.0, 10, dimension=np.int64(1000)) > dl.error_bar(1e-9, 1.0, 10)
