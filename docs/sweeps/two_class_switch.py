"""Two classes near the switch: coverage of the macro averages, a never-true class included.

The sweep behind docs/intervals.md's "The numerator, too" (stop 39):
``.venv/bin/python docs/sweeps/two_class_switch.py [RELEASES]`` (default 10,000 per cell,
84 cells, a few minutes on 2 cores). Noise is drawn here with numpy at fixed seeds at the
release's own law and scale — a simulation of post-processing, not a release path. Each
cell prints coverage among usable releases, the share usable and the median width.
"""

from __future__ import annotations

import sys

import numpy as np

from dpledger.metrics import flam
from dpledger.metrics.uncertainty import classification_batch

MATRICES = {  # rows: true class, columns: predicted; scaled to a total of 10,000
    "never-true": [[20.0, 1.0], [0.0, 0.0]],  # class 1 predicted 1 in 21, never true
    "1% recall 0.5": [[0.98, 0.01], [0.005, 0.005]],
    "1% recall 0.9": [[0.985, 0.005], [0.001, 0.009]],
}
KEYS = ("balanced_accuracy", "recall_macro", "precision_macro", "f1_macro", "mcc")
NOISES = (0.005, 0.0075, 0.01, 0.012, 0.015, 0.02, 0.03)  # noise scale / a cell's mean


def main(releases: int) -> None:
    for name, rows in MATRICES.items():
        m = np.array(rows)
        m = m / m.sum() * 10_000
        truth = flam.classification_metrics(m, labels="all")
        for law in ("gaussian", "laplace"):
            for level in (0.95, 0.99):
                for share in NOISES:
                    scale = share * m.sum() / 4
                    rng = np.random.default_rng(12345)
                    draw = rng.normal if law == "gaussian" else rng.laplace
                    noisy = m.reshape(-1) + draw(0.0, scale, (releases, 4))
                    b = classification_batch(noisy, scale, labels="all", distribution=law,
                                             max_total=m.sum(), level=level)  # fmt: skip
                    cells = []
                    for key in KEYS:
                        t = truth[key]
                        if t is None or np.isnan(t):
                            continue
                        ok = b.usable(key)
                        hit = (b.low[key] <= t) & (t <= b.high[key]) & ok
                        width = np.median((b.high[key] - b.low[key])[ok]) if ok.any() else np.nan
                        cells.append(f"{key} {hit.sum() / max(ok.sum(), 1):.4f} "
                                     f"({ok.mean():.3f}, {width:.4f})")  # fmt: skip
                    print(f"{name} | {law} | {level} | {share}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
