"""Review 39 (api): every client contribution stays within the bound the ledger charges
whatever the NUMPY TYPE of its input — float16, float32, longdouble (values past a double
round to inf), big-endian, non-contiguous, read-only, integers of every width — or is
refused with a typed :class:`DpLedgerError`. The sensitivity tests draw float64 and
int64 only; this property casts the same adversarial samples to each type.

Bound per row: a scalar in [low, high]; a vector's L1 norm ≤ cap·(1 + 1e-12) (the
ledger's ``CLIENT_ROUNDING_SLACK``). Deterministic (``derandomize=True``): a failure is
reproducible. It passes: a guard, not a reproducer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.errors import DpLedgerError
from dpledger.metrics.declarations import DECLARATIONS, Bounds

BIG = float(np.finfo(np.float64).max)
SLACK = 1e-12
values = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [0.0, -0.0, BIG, -BIG, 5e-324, 65504.0, 65520.0, 1e300, -1e300, 2.5, 2.5000000000000004]
)
FLOAT_TYPES = [np.float16, np.float32, np.longdouble, np.dtype(">f8"), np.float64]
INT_TYPES = [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64, np.dtype(">i8")]

CASES: dict[str, tuple[Bounds, dict[str, Any]]] = {
    "clipped_loss": (Bounds(low=0.0, high=2.5), {}),
    "along_across_ratio": (Bounds(low=0.0, high=10.0), {}),
    "pooled_along_across_ratio": (Bounds(cap=3.0), {"error_bound": 25.0, "max_samples": 4.0}),
    "error_histogram": (Bounds(cap=3.0, edges=(0.5, 1.0, 2.0)), {}),
    "calibration_gap": (Bounds(cap=2.0, dimension=6), {}),
    "coverage": (Bounds(cap=1.0, edges=(1.0, 2.0, 4.0)), {}),
    "confusion_matrix": (Bounds(cap=3.0), {"n_classes": 3}),
    "regression_measures": (
        Bounds(cap=2.0),
        {"y_bounds": (0.0, 3.0), "residual_bound": 2.0, "max_samples": 4.0},
    ),
}


def _cast(column: np.ndarray, dtype: Any, layout: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        out = column.astype(dtype)
    if layout == "strided":
        out = np.repeat(out, 2)[::2]
    elif layout == "read-only":
        out = out.copy()
        out.setflags(write=False)
    return out


def _column(name: str, draw: st.DrawFn, n: int) -> np.ndarray:
    if name in ("y_true", "y_pred"):
        return np.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    if name == "cell":
        return np.array(draw(st.lists(st.integers(0, 100), min_size=n, max_size=n)))
    if name in ("prob", "outcome"):
        return np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)))
    return np.array(draw(st.lists(values, min_size=n, max_size=n)))


@pytest.mark.parametrize("metric", CASES)
@settings(max_examples=40, deadline=None, derandomize=True)
@given(data=st.data())
def test_every_input_type_stays_within_the_charged_bound(metric: str, data: st.DataObject) -> None:
    decl = DECLARATIONS[metric]
    bounds, params = CASES[metric]
    lengths = data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=4), label="lengths")
    n = sum(lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    columns = {k: _column(k, data.draw, n) for k in decl.inputs}
    integer = any(k in ("y_true", "y_pred", "cell") for k in decl.inputs)
    dtype = data.draw(st.sampled_from(INT_TYPES if integer else FLOAT_TYPES), label="dtype")
    layout = data.draw(st.sampled_from(["plain", "strided", "read-only"]), label="layout")
    cast = {k: _cast(v, dtype, layout) for k, v in columns.items()}
    try:
        rows = decl.contribute(cast, bounds, offsets=offsets, workers=1, **params)
    except DpLedgerError:
        return  # refused, typed: NaN/inf after the cast, a value past a double
    assert rows.shape[0] == len(lengths)
    assert np.all(np.isfinite(rows))
    if decl.norm == "absolute":
        assert bounds.low is not None
        assert bounds.high is not None
        assert np.all(rows >= bounds.low)
        assert np.all(rows <= bounds.high)
    else:
        assert bounds.cap is not None
        assert np.all(np.abs(rows).sum(axis=1) <= bounds.cap * (1 + SLACK))
