"""pooled_ratio_interval's clip must square to a normal double (review 39, der).

The interval is the square root of A/B's on [0, clip²]. With clip = 1e200, clip²
overflowed: an unusable release came back as [0, inf], not the documented [0, clip]; with
clip = 1e-200 it underflowed to 0 and the error read "bounds must be numbers with low <
high, got (0.0, 0.0)", naming no argument the caller passed; a clip of 1e-160 made the
range subnormal. Such a clip is now InvalidInput naming clip.
"""

from __future__ import annotations

import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics import spatial

CODEC = spatial.pooled_ratio_codec(error_bound=1.0, max_samples=10, cap=1.0)


@pytest.mark.parametrize("clip", [1e200, 1e155, 1e-160, 1e-200])
def test_a_clip_whose_square_is_not_a_normal_double_is_refused(clip: float) -> None:
    with pytest.raises(InvalidInput, match="clip must be in"):
        spatial.pooled_ratio_interval([0.0, 0.0, 0.0], CODEC, 0.01, clip=clip)


def test_an_unusable_release_is_the_whole_range_zero_to_clip() -> None:
    iv = spatial.pooled_ratio_interval([0.0, 0.0, 0.0], CODEC, 0.01, clip=1e150)
    assert not iv.usable
    assert (iv.low, iv.high) == pytest.approx((0.0, 1e150))
