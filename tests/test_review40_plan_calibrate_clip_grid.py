"""Review 40 (planning): ``calibrate_clip``'s noise column was the closed form Δ/(ε·n).

A release is calibrated to OpenDP's map on the 2**-40 grid, which charges the input's
rounding on top of Δ: at a clip width near 1e-12 (ε = 1) its scale is about twice Δ/ε.
``dpledger calibrate`` (and ``dl.calibrate_clip``) reported half the noise a release at
the recommended bound carries, so its RMSE and its recommendation traded clipping bias
against noise no release has. The column is now the scale a release at that bound is
calibrated to, over the cohort. Deterministic (fixed seed).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import dpledger as dl

POLICY = """
name = "c"
version = "1"
neighbouring = "{nb}"
definition = "pure"
epoch_epsilon = "4"
eval_fraction = "0.25"
[regions]
names = ["a"]
[metrics.m]
kind = "scalar_mean"
epsilon = "{eps}"
clip = {{ low = "{low}", high = "{high}", source = "t" }}
"""


@pytest.mark.parametrize("nb", ["replace", "add_remove"])
@pytest.mark.parametrize(("width", "eps"), [(1e-12, "1"), (1e-10, "0.5"), (1.0, "1"), (1e-9, "1")])
def test_noise_column_is_the_releases_scale_over_the_cohort(
    tmp_path: Path, nb: str, width: float, eps: str
) -> None:
    n = 1000
    values = np.random.default_rng(40).uniform(0, width, 500)
    cal = dl.calibrate_clip(values, epsilon=float(eps), cohort=n, neighbouring=nb)
    clip = cal.to_clip()
    text = POLICY.format(nb=nb, eps=eps, low=clip.low, high=clip.high)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        policy = dl.Policy.from_toml(text, source="t.toml")
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        request = dl.ReleaseRequest(epoch=0, metric="m", region="a", cohort=n)
        release = ledger.release(request, 0.0)
    # the policy's clip is the table's bound to 6 significant digits: within 1e-6
    assert cal.recommended.noise_scale == pytest.approx(release.scale / n, rel=1e-6, abs=0)
