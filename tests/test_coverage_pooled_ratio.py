"""The pooled along/across ratio √(ΣΣacross² / ΣΣalong²) from one noisy release: coverage.

The outside audit (stats3, S1) ran it through ``derived_interval`` as its docstring showed:
the delta method on a square root near 0 covered 0.74–0.86 where ΣΣacross² is within
the noise (ratio 0.5, ΣΣalong² at 3–5 noise scales; 0.93 at 10). A per-release switch
to Monte Carlo where f bends, or a flag there, selects on the noise (0.66–0.92 and
0.25–0.89 among the releases kept: stats25), so ``derived_interval`` keeps the method
the caller chose and says when to choose Monte Carlo; :func:`spatial.pooled_ratio_interval`
instead takes the square root of the interval of A/B (Fieller's, conditional on B's
guard), which covers 0.944–0.976 in these cells (3,000 releases each, these seeds).

Each cell is held to 0.95 − 3.72·√(0.95·0.05/k) among its k published releases (false
failure 1e-4 per check at a true 0.95; < 0.1% over the 5 checks). Noise is numpy's,
seeded (test-only simulation of many releases).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.metrics import spatial
from dpledger.metrics._intervals import Guard, noise_std
from dpledger.metrics._ratio import RATIO, linear_ratio_batch

RELEASES = 3_000
CLIP = 10.0
CELLS = (("laplace", 3.0), ("laplace", 5.0), ("laplace", 10.0), ("gaussian", 3.0),
         ("gaussian", 5.0))  # fmt: skip


@pytest.mark.parametrize(("law", "along"), CELLS)
def test_pooled_ratio_covers_with_across_within_the_noise(law: str, along: float) -> None:
    """Ratio 0.5 (ΣΣacross² = 0.25·ΣΣalong²), the release's noise scale 1 per coordinate."""
    rng = np.random.default_rng(3300 + CELLS.index((law, along)))
    truth = 0.5
    v = np.array([truth * truth * along, along, 100.0])
    noise = rng.laplace if law == "laplace" else rng.normal
    x = v + noise(0.0, 1.0, (RELEASES, 3))
    batch = linear_ratio_batch(
        x, noise_std(1.0, 3, law), np.eye(3)[0], np.eye(3)[1],  # type: ignore[arg-type]
        bounds=(0.0, CLIP * CLIP), guard=Guard("along", 2.0 * along),
        distribution=law,  # type: ignore[arg-type]
    )  # fmt: skip
    usable = batch.usable(RATIO)
    k = int(usable.sum())
    assert k >= 0.4 * RELEASES, k
    lo, hi = np.sqrt(batch.low[RATIO]), np.sqrt(batch.high[RATIO])
    hit = (lo <= truth) & (truth <= hi)
    assert hit[usable].mean() >= 0.95 - 3.72 * math.sqrt(0.95 * 0.05 / k), (hit[usable].mean(), k)


def test_pooled_ratio_interval_through_a_codec() -> None:
    """One release through :func:`spatial.pooled_ratio_interval`: the square root of the batch
    row on the decoded coordinates; unusable ([0, clip]) with a reason when ΣΣalong² is
    within the noise."""
    codec = spatial.pooled_ratio_codec(error_bound=10.0, max_samples=20.0, cap=3.0)
    rng = np.random.default_rng(7)
    sums = np.array([0.25 * 2e5, 2e5, 100.0])  # ratio 0.5; ΣΣalong² at ~35 noise s.e.
    per = codec.decode(np.ones(3))
    released = sums / per + rng.laplace(0.0, 2.0, 3)
    iv = spatial.pooled_ratio_interval(released, codec, 2.0, clip=CLIP)
    assert iv.usable
    assert iv.low < 0.5 < iv.high
    assert "square root" in iv.method
    b = codec.decoded_scale(2.0)
    x = codec.decode(released).reshape(1, -1)
    batch = linear_ratio_batch(
        x, noise_std(b, 3, "laplace"), np.eye(3)[0], np.eye(3)[1], bounds=(0.0, CLIP * CLIP),
        guard=Guard("pooled ΣΣalong²", math.inf),
    )  # fmt: skip
    assert iv.low == pytest.approx(math.sqrt(batch.low[RATIO][0]), rel=1e-9, abs=1e-12)
    assert iv.high == pytest.approx(math.sqrt(batch.high[RATIO][0]), rel=1e-9, abs=1e-12)
    small = np.array([0.0, 0.0, 10.0]) / per + rng.laplace(0.0, 2.0, 3)
    flagged = spatial.pooled_ratio_interval(small, codec, 2.0, clip=CLIP, max_along=1.0)
    assert not flagged.usable
    assert (flagged.low, flagged.high) == (0.0, CLIP)
    assert "ΣΣalong²" in (flagged.reason or "")


def test_a_ratio_above_its_clip_is_named_in_the_reason() -> None:
    """A true ratio above ``clip`` (30 against a clip of 10) made every release unusable
    with "the noise draw was extreme", even at almost no noise; the reason now also names
    a clip set too low (review 40, statistics)."""
    codec = spatial.pooled_ratio_codec(error_bound=10.0, max_samples=20.0, cap=3.0)
    per = codec.decode(np.ones(3))
    sums = np.array([900.0 * 2e3, 2e3, 100.0])  # ratio √900 = 30
    iv = spatial.pooled_ratio_interval(sums / per, codec, 0.01, clip=10.0)
    assert not iv.usable
    assert "widen the clip" in (iv.reason or "")
