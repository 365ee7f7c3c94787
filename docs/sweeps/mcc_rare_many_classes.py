"""MCC at 13–20 classes with one 1% class: coverage, branch and miss side per cell.

The sweep behind docs/intervals.md's MCC rows (review of the "13–20 classes, accuracy 0.9,
a 1% class" shortfall): ``.venv/bin/python docs/sweeps/mcc_rare_many_classes.py
[GRID] [RELEASES] [SEED0]``, GRID ``target`` (13/16/20 classes × accuracy 0.9, 0.99 ×
the 1% class at 3.5, 5, 9 s.e. of its count's noise × both laws, 36 cells, about 6
minutes at 20,000 releases on 2 shared cores), ``confirm`` (13 and 17 classes, accuracy
0.9) or ``acc99`` (accuracy 0.99, the class at 7–20 s.e.). The rest of the classes are
balanced (``tests/coverage_cases.hard_confusion``, mean cell 100); the per-cell noise s.d.
is the 1% class's true count / (K·√C). Noise is numpy's, seeded: a simulation of
post-processing, not a release path. Columns: coverage ± s.e. among published, the share
published, the share whose MCC kept the delta interval (the rest Fieller's set), the
misses with the truth below / above the interval, the median width.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from coverage_cases import hard_confusion

from dpledger.metrics._flam_intervals import classification_batch
from dpledger.metrics.flam import classification_metrics

GRIDS = {
    "target": [(c, a, k, d) for c in (13, 16, 20) for a in (0.9, 0.99) for k in (3.5, 5.0, 9.0)
               for d in ("laplace", "gaussian")],
    "confirm": [(c, 0.9, k, d) for c in (13, 17) for k in (3.5, 5.0, 9.0)
                for d in ("laplace", "gaussian")],
    "acc99": [(c, 0.99, k, d) for c in (13, 20) for k in (7.0, 9.0, 12.0, 20.0)
              for d in ("laplace", "gaussian")],
}  # fmt: skip
CHUNK = 2000


def cell(c: int, acc: float, k: float, dist: str, releases: int, seed: int) -> str:
    n = 100.0 * c * c
    m = hard_confusion(c, "1%", acc, n)
    truth = classification_metrics(m, labels="all")["mcc"]
    sd = m.sum(axis=1)[-1] / (k * math.sqrt(c))
    rng = np.random.default_rng(seed)
    cols: list[list[np.ndarray]] = [[], [], [], []]
    for s in range(0, releases, CHUNK):
        r = min(CHUNK, releases - s)
        if dist == "laplace":
            scale = sd / math.sqrt(2.0)
            x = m.reshape(-1) + rng.laplace(0.0, scale, (r, c * c))
        else:
            scale = sd
            x = m.reshape(-1) + rng.normal(0.0, sd, (r, c * c))
        b = classification_batch(x, scale, distribution=dist, max_total=n)  # type: ignore[arg-type]
        for out, v in zip(cols, (b.low["mcc"], b.high["mcc"], b.code["mcc"],
                                 b.per_class["mcc"][1]), strict=True):  # fmt: skip
            out.append(v)
    lo, hi, code, fieller = (np.concatenate(v) for v in cols)
    pub = code == 0
    k_pub = int(pub.sum())
    cov = float(((lo <= truth) & (truth <= hi))[pub].mean())
    se = math.sqrt(cov * (1.0 - cov) / k_pub)
    below, above = float((truth < lo)[pub].mean()), float((truth > hi)[pub].mean())
    return (f"{c:3d} {acc:5} {k:5} {dist:9} {truth:.4f} {sd / (n / c / c):.3f}  {cov:.4f} "
            f"{se:.4f} {k_pub / releases:.3f} {float((pub & ~fieller).mean()):.3f}  "
            f"{below:.4f} {above:.4f} {float(np.median((hi - lo)[pub])):.4f}")  # fmt: skip


def main() -> None:
    grid = sys.argv[1] if len(sys.argv) > 1 else "target"
    releases = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    seed0 = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    t0 = time.time()
    print("  C   acc     K law       truth  sd/cell cover  ±se    pub   delta  below  above  width")
    for i, (c, acc, k, dist) in enumerate(GRIDS[grid]):
        print(cell(c, acc, k, dist, releases, seed0 + i), flush=True)
    print(f"# {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
