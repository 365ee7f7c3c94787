"""Review 40 (spatial intervals): coverage on the real release path, with OpenDP's own noise.

One real ``Ledger.release`` per cell gives the release's facts; ``mechanisms.apply_many``
(the writer's own OpenDP call) then draws many releases of the same true aggregate, and
each printed interval is computed on ``dataclasses.replace(rel, noisy_sum=…)``. The cells
are the hardest of ``docs/sweeps/spatial_release_path.py`` that run in seconds: the demo's
scalar bars at a cohort of 3 (both laws, both relations), the Flower health counts' ci95
and ``dropped_ci95`` (the tail share and gap cells take ~40 s each here: they are in the
sweep). OpenDP's noise is not seedable: each check asserts coverage ≥ 0.95 −
3.72·√(0.95·0.05/k) among its k published intervals, a false failure of 1e-4 per check at
a true 0.95 (< 0.2% over the 14 checks here).
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger import mechanisms as mech
from dpledger.flower.report import ci95, dropped_ci95


def _floor(k: int) -> float:
    return 0.95 - 3.72 * math.sqrt(0.95 * 0.05 / k)


def _policy(neigh: str, defn: str) -> dl.Policy:
    text = SPATIAL.read_text().replace('"replace"', f'"{neigh}"', 1)
    if defn == "zcdp":
        text = text.replace('"pure"', '"zcdp"', 1)
        text = text.replace('epoch_epsilon = "4.0"', 'epoch_rho = "0.08"')
    text = re.sub(r"^target = .*$", "", text, flags=re.M)  # no floor: tiny cohorts
    return dl.Policy.from_toml(text, source="spatial-no-target.toml")


def _release(path: Path, policy: dl.Policy, metric: str, cohort: int, agg: object) -> dl.Release:
    spec = policy.metric(metric)
    with dl.Ledger.open(path, policy, mode="create") as ledger:
        req = dl.ReleaseRequest(epoch=0, metric=metric, region="na", cohort=cohort,
                                edges_version=spec.edges_version)  # fmt: skip
        return ledger.release(req, agg)


def _draws(rel: dl.Release, agg: np.ndarray, k: int) -> list[dl.Release]:
    rows = mech.apply_many(rel.facts, [agg.reshape(-1)] * k)
    return [dataclasses.replace(rel, noisy_sum=np.array(r)) for r in rows]


LAWS = [("replace", "pure"), ("replace", "zcdp"), ("add_remove", "pure"), ("add_remove", "zcdp")]


@pytest.mark.parametrize(("neigh", "defn"), LAWS)
def test_scalar_bars_cover_at_a_cohort_of_three(tmp_path: Path, neigh: str, defn: str) -> None:
    policy = _policy(neigh, defn)
    for metric, mean in (("clipped_mean_loss", 3.3), ("along_across_ratio", 9.9)):
        rel = _release(tmp_path / f"{metric}.db", policy, metric, 3, mean * 3)
        k = 4_000
        hit = sum(
            lo <= mean <= hi
            for lo, hi in (r.interval for r in _draws(rel, np.array([mean * 3]), k))
        )
        assert hit / k >= _floor(k), (metric, hit / k)


@pytest.mark.parametrize("defn", ["pure", "zcdp"])
def test_health_counts_and_dropped_cover(tmp_path: Path, defn: str) -> None:
    unit, amount = ("epsilon", "0.1") if defn == "pure" else ("rho", "0.005")
    text = f"""
name = "fl"
version = "1"
neighbouring = "add_remove"
definition = "{defn}"
epoch_{unit} = "1"
eval_fraction = "0.25"
[regions]
names = ["na"]
[metrics.health]
kind = "vector_sum"
{unit} = "{amount}"
dimension = 3
cap_per_client = "1"
nonnegative = true
"""
    policy = dl.Policy.from_toml(text, source="fl.toml")
    truth = np.array([10.0, 5.0, 1.0])
    rel = _release(tmp_path / "h.db", policy, "health", 200, truth)
    k = 4_000
    rels = _draws(rel, truth, k)
    dropped = sum(abs(r.noisy_sum.sum() - truth.sum()) <= dropped_ci95(r) for r in rels)
    assert dropped / k >= _floor(k), dropped / k
    counts = sum(np.abs(r.noisy_sum - truth) <= ci95(r) for r in rels)
    assert (np.asarray(counts) / k >= _floor(k)).all(), np.asarray(counts) / k
