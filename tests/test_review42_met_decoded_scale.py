"""Review 42 (met): ``VectorSumCodec.decoded_scale`` (a release's noise scale in measure
units) returned NaN, inf or a negative "scale" for a NaN, inf or negative scale instead
of naming the bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics.codec import VectorSumCodec

CODEC = VectorSumCodec.build(("a", "b"), (1.0, 2.0), cap=1.0)


@pytest.mark.parametrize("scale", [math.nan, -1.0, math.inf, [1.0, -2.0], np.array([np.nan, 1.0])])
def test_a_scale_that_is_no_scale_is_refused(scale: object) -> None:
    with pytest.raises(dl.InvalidInput, match="scale must be finite and ≥ 0"):
        CODEC.decoded_scale(scale)


def test_a_scale_decodes_per_coordinate() -> None:
    np.testing.assert_array_equal(CODEC.decoded_scale(1.0), [2.0, 4.0])
    np.testing.assert_array_equal(CODEC.decoded_scale([0.0, 1.0]), [0.0, 4.0])
