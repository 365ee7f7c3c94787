"""R² of a (nearly) constant y, with real OpenDP noise: coverage among published releases.

The sweep behind docs/intervals.md's "A constant y" figures (review 40):
``PYTHONPATH=. .venv/bin/python docs/sweeps/r2_constant_y.py [RELEASES]`` (default 40,000
per cell, 24 cells, a few minutes on 2 cores). Each cell makes ONE real
``release_regression`` on a throwaway SQLite ledger, then draws RELEASES more noisy vectors
at that release's own mechanism facts through ``dpledger.mechanisms.apply_many`` (the
writer's own OpenDP call) and post-processes them with ``regression_batch`` at
``rel.interval_scale()`` (what ``derive_regression`` runs). The fleet data (y of s.d.
1e-6 around 100, predictions off by 3e-4 to 1) is numpy's, seeded.
"""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path

import numpy as np

from dpledger import Ledger, Policy, ReleaseRequest
from dpledger import mechanisms as mech
from dpledger.ledger.derived import release_regression
from dpledger.metrics import flam_regression as fr
from dpledger.metrics.uncertainty import regression_batch

POLICY = """
name = "r2-constant-y"
version = "1"
neighbouring = "replace"
definition = "{definition}"
{budget} = "1e6"
eval_fraction = "0.25"
allocation = "pooled"
[regions]
names = ["all"]
[metrics.m]
kind = "vector_sum"
{unit} = "{eps}"
mechanism = "{law}"
dimension = 5
cap_per_client = "1"
nonnegative = false
"""


def cell(
    law: str, clients: int, per: int, eps: float, err: float, releases: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    n = clients * per
    y = 100 + rng.normal(0, 1e-6, n)
    kw = {"y_bounds": (40.0, 160.0), "residual_bound": 30.0, "max_samples": float(per)}
    rows = fr.regression_measures(
        y, y + rng.normal(0, err, n), offsets=np.arange(clients) * per, **kw
    )  # type: ignore[arg-type]
    codec = fr.regression_codec(cap=1.0, **kw)  # type: ignore[arg-type]
    enc = codec.encode(rows).sum(axis=0)
    truth = fr.regression_metrics(rows.sum(axis=0))["r2"]
    pure = law == "laplace"
    text = POLICY.format(
        definition="pure" if pure else "zcdp", budget="epoch_epsilon" if pure else "epoch_rho",
        unit="epsilon" if pure else "rho", eps=eps if pure else eps * eps / 2, law=law,
    )  # fmt: skip
    req = ReleaseRequest(epoch=0, metric="m", region="all", cohort=clients)
    with (
        tempfile.TemporaryDirectory() as d,
        Ledger.open(Path(d) / "l.db", Policy.from_toml(text), mode="create") as ledger,
    ):
        rel = release_regression(ledger, req, enc, codec).release
    noisy = np.array(mech.apply_many(rel.facts, [enc] * releases))
    scale, _ = rel.interval_scale()
    b = regression_batch(noisy, codec, scale, distribution=rel.facts.mechanism, cohort=clients)
    pub = b.usable("r2")
    hit = (b.low["r2"] <= truth) & (truth <= b.high["r2"])
    k = int(pub.sum())
    c = float(hit[pub].mean()) if k else math.nan
    s = math.sqrt(max(c * (1 - c), 1e-12) / max(k, 1))
    two = int((pub & ~b.one_sided["r2"]).sum())
    print(f"{law} clients={clients}x{per} eps={eps} err={err} R2={truth:.3g} published={k} "
          f"covered={c:.4f}±{s:.4f} two-sided={two}", flush=True)  # fmt: skip


def main(releases: int) -> None:
    seed = 5
    for law in ("laplace", "gaussian"):
        for clients, per in ((20, 5), (200, 20)):
            for eps in (1.0, 50.0):
                for err in (3e-4, 0.1, 1.0):
                    cell(law, clients, per, eps, err, releases, seed)
                    seed += 1


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40_000)
