"""Review 42 (met): ``VectorSumCodec`` took any positive bounds and cap, so a coordinate's
factor ``weight·cap / bound`` could overflow to inf or underflow to 0. With an infinite
factor a client's zero measure encoded as NaN (0·inf): ``pooled_along_across_ratio``'s
declaration returned NaN rows for clients with no along/across error (error_bound 1e-100,
cap 1e300), and ``regression_measures``' likewise; with a factor of 0 every measure
encoded as 0 and decoded as NaN. A codec whose share or factor is not a finite, normal
double is refused when it is built."""

from __future__ import annotations

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics import pooled_ratio_codec, regression_codec
from dpledger.metrics.codec import VectorSumCodec
from dpledger.metrics.declarations import DECLARATIONS, Bounds


def test_an_infinite_factor_is_refused_not_encoded_as_nan() -> None:
    with pytest.raises(dl.InvalidInput, match=r"sum_across_sq.*not a finite, normal double"):
        pooled_ratio_codec(error_bound=1e-100, max_samples=0.5, cap=1e300)
    with pytest.raises(dl.InvalidInput, match="not a finite, normal double"):
        DECLARATIONS["pooled_along_across_ratio"].contribute(
            {"along": np.zeros(2), "across": np.zeros(2)},
            Bounds(cap=1e300),
            offsets=[0, 1],
            error_bound=1e-100,
            max_samples=0.5,
        )
    with pytest.raises(dl.InvalidInput, match="not a finite, normal double"):
        regression_codec(y_bounds=(-1.0, 2.0), residual_bound=1e-100, max_samples=0.5, cap=1e300)


@pytest.mark.parametrize(
    ("bounds", "cap", "weights"),
    [((1e300, 1.0), 1e-10, None), ((1.0, 1.0), 1e-300, (1e-20, 1.0)), ((1e-300, 1.0), 1e10, None)],
)
def test_a_factor_or_share_out_of_the_normal_doubles_is_refused(
    bounds: tuple[float, float], cap: float, weights: tuple[float, float] | None
) -> None:
    with pytest.raises(dl.InvalidInput, match="not a finite, normal double"):
        VectorSumCodec.build(("a", "b"), bounds, cap=cap, weights=weights)


def test_ordinary_codecs_still_encode_within_the_cap() -> None:
    codec = VectorSumCodec.build(("a", "b"), (1e100, 1e-100), cap=1e5)
    z = codec.encode(np.array([[1e100, 0.0], [0.0, -1e-100], [0.0, 0.0]]))
    assert np.all(np.isfinite(z))
    assert float(np.abs(z).sum(axis=1).max()) <= 1e5
