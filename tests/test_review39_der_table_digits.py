"""DerivedRelease.table() shows a small-unit metric's value and interval (review 39, der).

Regression measures in small units (y in [0, 0.01]) give MSE ~3e-7 with a 95% interval
about 7e-8 wide; the table printed every number with 4 decimals:
``mse  0.0000  [ 0.0000,  0.0000]`` — a value of zero known exactly, where ``intervals``
held 2.9e-7 [2.6e-7, 3.3e-7] (the same misreport as issue 11's ``r2 1.0000 [1.0000,
1.0000]``). Deterministic in what it asserts: whatever OpenDP's noise, every usable row
must print a nonzero value as nonzero and a nonzero-width interval with distinct ends.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from dpledger import Ledger, Policy, ReleaseRequest
from dpledger.ledger.derived import release_regression
from dpledger.metrics import flam_regression

POLICY = """
name = "p"
version = "1"
neighbouring = "replace"
epoch_epsilon = "1000"
eval_fraction = "0.25"
[regions]
names = ["all"]
[metrics.regression]
kind = "vector_sum"
epsilon = "10"
dimension = 5
cap_per_client = "1"
nonnegative = false
"""


def test_small_unit_regression_rows_show_the_interval(tmp_path: Path) -> None:
    unit = 1e-3
    kw = {"y_bounds": (0.0, 10.0 * unit), "residual_bound": 3.0 * unit, "max_samples": 50.0}
    codec = flam_regression.regression_codec(cap=1.0, **kw)  # type: ignore[arg-type]
    rng = np.random.default_rng(1)  # synthetic data, not release noise
    n = 2000
    y = rng.uniform(0.0, 10.0, n * 20) * unit
    rows = flam_regression.regression_measures(
        y,
        y + rng.normal(0.0, 0.5, y.size) * unit,
        offsets=np.arange(n) * 20,
        **kw,  # type: ignore[arg-type]
    )
    req = ReleaseRequest(epoch=1, metric="regression", region="all", cohort=n)
    with Ledger.open(tmp_path / "l.db", Policy.from_toml(POLICY), mode="create") as ledger:
        out = release_regression(ledger, req, codec.encode(rows).sum(axis=0), codec)
    printed = dict(zip(out.metrics, out.rows(), strict=True))
    checked = 0
    for name, iv in out.intervals.items():
        if not iv.usable or iv.one_sided:
            continue
        found = re.match(r"\s*\S+\s+(\S+)\s+\[\s*(\S+),\s*(\S+)\]", printed[name])
        assert found, printed[name]
        value, low, high = (float(found.group(i)) for i in (1, 2, 3))
        assert value != 0.0, printed[name]
        assert low < high, printed[name]
        assert math.isclose(value, out.metrics[name], rel_tol=1e-3), printed[name]
        checked += 1
    assert checked >= 3, out.table()  # MSE, RMSE and MAE are far from the noise here
