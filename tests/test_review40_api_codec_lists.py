"""Review 40 (api): a ``VectorSumCodec`` (a frozen dataclass) kept the lists it was given
for its bounds and weights, checked once: a list changed afterwards changed the codec.
``release_regression`` checks the codec's names and cap before its spend, and reads the
bounds after it: a bound set to 0 made it raise ``ZeroDivisionError`` with ε spent and no
value returned ("a release that spent always returns"). The codec now keeps the checked
floats in tuples."""

from __future__ import annotations

import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np

import dpledger as dl
from dpledger.metrics import VectorSumCodec, regression_codec


def test_a_codec_built_from_lists_cannot_change_after_its_checks(tmp_path: Path) -> None:
    from test_published import REG_KW, SMALL

    good = regression_codec(cap=1.0, **REG_KW)
    bounds, weights = list(good.bounds), list(good.weights)
    codec = VectorSumCodec(good.names, bounds, weights, good.cap)  # type: ignore[arg-type]
    bounds[4] = 0.0  # the caller's list, changed after the codec was checked
    weights[0] = -1.0
    assert codec == good
    assert isinstance(codec.bounds, tuple)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        policy = dl.Policy.from_toml(SMALL)
    request = dl.ReleaseRequest(epoch=1, metric="regression", region="all", cohort=1000)
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        derived = dl.release_regression(ledger, request, np.zeros(5), codec)
        assert set(derived.intervals) == {"r2", "mse", "rmse", "mae"}
        assert ledger.spent(1) == dl.Budget(Fraction(1), "epsilon")


def test_a_codec_holds_floats() -> None:
    codec = VectorSumCodec(("a", "b"), (Fraction(1), np.float32(2)), (0.5, 0.5), 3)
    assert codec.bounds == (1.0, 2.0)
    assert all(type(b) is float for b in (*codec.bounds, *codec.weights, codec.cap))
    assert hash(codec) == hash(VectorSumCodec(("a", "b"), (1.0, 2.0), (0.5, 0.5), 3.0))
