"""R² near the noise: coverage among published releases, two-sided and one-sided apart.

The sweep behind docs/intervals.md's "regression R² near the noise" row (stop 31):
``.venv/bin/python docs/sweeps/r2_near_noise.py [RELEASES]`` (default 20,000 per cell,
400 cells, about 4 minutes on 2 cores). Noise is drawn here with numpy at the release's
own law and scale — a simulation of post-processing, not a release path. The codec is
the tests' (y in [40, 160], residual bound 30, 20 samples per client); y − c is centred
(3 ± 15, encoded noise scale 20) or off-centre (50 ± 5, scale 2).
"""

from __future__ import annotations

import math
import sys

import numpy as np

from dpledger.metrics import flam_regression
from dpledger.metrics._regression_intervals import regression_batch

CODEC = flam_regression.regression_codec(
    y_bounds=(40.0, 160.0), residual_bound=30.0, max_samples=20.0, cap=1.0
)
SHAPES = {  # (mean, s.d.) of y − c, encoded noise scale, cohorts (clients of 20 samples)
    "centred": ((3.0, 15.0), 20.0, (2000, 3000, 5000, 8000, 12000)),
    "off-centre": ((50.0, 5.0), 2.0, (3000, 5000, 8000, 12000, 20000)),
}


def _share(hit: np.ndarray, rows: np.ndarray) -> str:
    k = int(rows.sum())
    if not k:
        return "-"
    c = float(hit[rows].mean())
    return f"{c:.4f}±{math.sqrt(max(c * (1 - c), 1e-12) / k):.4f} ({k})"


def _cell(law: str, shape: str, r2: float, cohort: int, level: float, releases: int,
          seed: int) -> float:  # fmt: skip
    """Print one cell's line; return its published coverage in s.e. from ``level``."""
    (mean, sd), scale, _ = SHAPES[shape]
    n = 20.0 * cohort
    mse = sd * sd * (1 - r2)
    sums = np.array([n * mse, n * math.sqrt(mse * 2 / math.pi), n * mean,
                     n * (sd * sd + mean * mean), n])  # fmt: skip
    truth = flam_regression.regression_metrics(sums)["r2"]
    # Σ(y−ȳ)²'s own noise s.d. at the true mean: Σ(y−c)², Σ(y−c) and n all carry noise
    u = CODEC.decoded_scale(scale) * (math.sqrt(2) if law == "laplace" else 1)
    sst_sd = math.sqrt(u[3] ** 2 + (2 * mean * u[2]) ** 2 + (mean * mean * u[4]) ** 2)
    rng = np.random.default_rng(seed)
    draw = rng.laplace if law == "laplace" else rng.normal
    x = sums / CODEC.decode(np.ones(5)) + draw(0.0, scale, (releases, 5))
    b = regression_batch(x, CODEC, scale, level=level, distribution=law, cohort=cohort)  # type: ignore[arg-type]
    lo, hi = b.low["r2"], b.high["r2"]
    hit = (lo <= truth) & (truth <= hi)
    pub, one = b.usable("r2"), b.one_sided["r2"]
    print(f"{law} {shape} r2={r2} cohort={cohort} SST/sd={n * sd * sd / sst_sd:.2f} "
          f"level={level}: all {hit.mean():.4f} published {_share(hit, pub)} "
          f"two-sided {_share(hit, pub & ~one)} one-sided {_share(hit, one)} "
          f"whole-range {int((one & (hi >= 1)).sum())}", flush=True)  # fmt: skip
    k = int(pub.sum())
    if k <= 50:
        return math.inf
    c = float(hit[pub].mean())
    return (c - level) / math.sqrt(max(c * (1 - c), 1e-12) / k)


def main(releases: int) -> None:
    """Every cell; then the worst published coverage in s.e. from its level."""
    seed, worst = 777, math.inf
    for law in ("laplace", "gaussian"):
        for shape, (_, _, cohorts) in SHAPES.items():
            for r2 in (0.99, 0.9, 0.5, 0.0, -0.5):
                for cohort in cohorts:
                    for level in (0.9, 0.95, 0.99, 0.995):
                        worst = min(worst, _cell(law, shape, r2, cohort, level, releases, seed))
                        seed += 1
    print(f"worst published coverage: {worst:.2f} s.e. from its level")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
