"""Coverage of the spatial metric set's printed intervals on the real release path (review 40).

Each cell makes one real ``Ledger.release`` on a temporary SQLite ledger (the shipped
spatial policy, or a small Flower-style policy), then draws many releases of the same
true aggregate with the writer's own OpenDP call (``mechanisms.apply_many(rel.facts, …)``)
and computes the printed interval of each (``dataclasses.replace(rel, noisy_sum=…)``):

* ``scalar``: ``value ± error_bar`` of clipped_mean_loss / along_across_ratio (cohorts 3–50);
* ``hist``: the demo's tail share (``sim.demo.share_interval``), totals 2–30 noise scales,
  shares 0, 0.01, 0.02, 0.94, 1;
* ``gap``: the top bucket's calibration gap (the demo's ``_derive``) and the chart's
  per-bucket gap among the buckets it shows (``plots.clearly_positive``), counts 1–6 scales;
* ``flower``: the mean over reporters (``flower.means._mean``), the health counts' ci95 and
  ``dropped_ci95``, add_remove, planned cohorts 20–1,000, 3–1,000 reporters;
* ``pooled``: ``spatial.pooled_ratio_interval`` (ΣΣalong² at 2–20 scales, ratio 0.5 and 3,
  ``max_along`` infinite or cohort × bound).

Both relations (replace, add_remove) and both laws (pure/Laplace, zCDP/Gaussian) where
the metric admits them. Usage: ``python docs/sweeps/spatial_release_path.py [part] [draws]``
(default all parts, 2,000 draws per cell; about 40 minutes on one core). Prints one line
per cell: published count and coverage of the true pre-noise value among them.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

import dpledger as dl
from dpledger import mechanisms as mech
from dpledger.flower.means import _mean
from dpledger.flower.report import ci95, dropped_ci95
from dpledger.metrics import spatial
from dpledger.sim.demo import DEFAULT_POLICY, share_interval
from dpledger.sim.plots import clearly_positive

warnings.simplefilter("ignore")
K = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000
PART = sys.argv[1] if len(sys.argv) > 1 else "all"


def spatial_policy(neigh: str, defn: str) -> dl.Policy:
    t = DEFAULT_POLICY.read_text().replace('"replace"', f'"{neigh}"', 1)
    if defn == "zcdp":
        t = t.replace('"pure"', '"zcdp"', 1).replace('epoch_epsilon = "4.0"', 'epoch_rho = "0.08"')
    return dl.Policy.from_toml(re.sub(r"^target = .*$", "", t, flags=re.M), source="sweep.toml")


def release(pol: dl.Policy, metric: str, cohort: int, agg: object) -> dl.Release:
    spec = pol.metric(metric)
    with dl.Ledger.open(Path(tempfile.mkdtemp()) / "l.db", pol, mode="create") as ledger:
        req = dl.ReleaseRequest(epoch=0, metric=metric, region=pol.regions.names[0] if
                                pol.regions.names else "r", cohort=cohort,
                                edges_version=spec.edges_version)  # fmt: skip
        return ledger.release(req, agg)


def draws(rel: dl.Release, agg: object) -> list[dl.Release]:
    a = np.asarray(agg, dtype=float).reshape(-1)
    out: list[tuple[float, ...]] = []
    for i in range(0, K, 500):
        out += mech.apply_many(rel.facts, [a] * min(500, K - i))
    return [dataclasses.replace(rel, noisy_sum=np.array(row)) for row in out]


def line(label: str, hits: int, pub: int) -> None:
    cov = hits / pub if pub else math.nan
    low = 0.95 - 3.72 * math.sqrt(0.95 * 0.05 / pub) if pub >= 50 else math.nan
    print(f"{label:<60} published {pub:>5}  covered {cov:.4f}{'  SHORT' if cov < low else ''}",
          flush=True)  # fmt: skip


LAWS = [(n, d) for n in ("replace", "add_remove") for d in ("pure", "zcdp")]


def scalar() -> None:
    for neigh, defn in LAWS:
        pol = spatial_policy(neigh, defn)
        for metric, n, mean in (("clipped_mean_loss", 3, 3.3), ("clipped_mean_loss", 50, 0.2),
                                ("along_across_ratio", 5, 9.9)):  # fmt: skip
            rel = release(pol, metric, n, mean * n)
            hits = 0
            for r in draws(rel, [mean * n]):
                lo, hi = r.interval
                hits += int(lo <= mean <= hi)
            line(f"scalar {neigh} {defn} {metric} n={n} mean={mean}", hits, K)


def hist() -> None:
    for neigh, defn in LAWS:
        pol = spatial_policy(neigh, defn)
        b = release(pol, "error_histogram", 10, np.ones(7)).scale
        for scales in (2, 5, 10, 30):
            for tail in (0.0, 0.01, 0.02, 0.94, 1.0):
                agg = np.array([(1 - tail) / 6] * 6 + [tail]) * scales * b
                rel = release(pol, "error_histogram", math.ceil(agg.sum() / 40), agg)
                hits = pub = 0
                for r in draws(rel, agg):
                    iv = share_interval(r, -1, slice(None), (0.0, 1.0), "total count")
                    if iv.usable:
                        pub += 1
                        hits += int(iv.low <= tail <= iv.high)
                line(f"hist {neigh} {defn} total={scales}b tail={tail}", hits, pub)


def gap() -> None:
    for neigh, defn in LAWS:
        pol = spatial_policy(neigh, defn)
        b = release(pol, "calibration_gap", 10, np.ones(10)).scale
        for scales in (1, 3, 6):
            for g in (0.95, 0.0, -0.95):
                agg = np.zeros(10)
                agg[9], agg[4], agg[5:9], agg[0:4] = scales * b, g * scales * b, 50 * b, 2.5 * b
                rel = release(pol, "calibration_gap", math.ceil(np.abs(agg).sum() / 20) + 1, agg)
                hits = pub = shits = shown = 0
                for r in draws(rel, agg):
                    iv = share_interval(r, 4, -1, (-1.0, 1.0), "top bucket's count")
                    if iv.usable:
                        pub += 1
                        hits += int(iv.low <= g <= iv.high)
                    if clearly_positive(r)[0][9]:
                        iv = share_interval(r, 4, 9, (-1.0, 1.0), "bucket count")
                        shown += 1
                        shits += int(iv.low <= g <= iv.high)
                line(f"gap {neigh} {defn} count={scales}b gap={g} (report)", hits, pub)
                line(f"gap {neigh} {defn} count={scales}b gap={g} (chart)", shits, shown)


FLOWER = """name = "fl"
version = "1"
neighbouring = "add_remove"
definition = "{defn}"
epoch_{unit} = "100"
eval_fraction = "1"
[regions]
names = ["r"]
[metrics.loss]
kind = "scalar_mean"
{unit} = "{e1}"
clip = {{ low = "{lo}", high = "{hi}", source = "t" }}
[metrics.health]
kind = "vector_sum"
{unit} = "{e2}"
dimension = 3
cap_per_client = "1"
nonnegative = true
"""


def flower() -> None:
    for defn in ("pure", "zcdp"):
        unit = "epsilon" if defn == "pure" else "rho"
        for planned, rep, fail, rej, lo, hi, truth, e1, e2 in (
            (200, 10, 5, 1, 0, 3.4, 3.06, 1.0, 0.1), (50, 5, 0, 0, 0, 3.4, 3.3, 1.0, 0.1),
            (400, 160, 20, 0, 0, 3.4, 1.7, 1.0, 0.01), (100, 30, 2, 2, -1, 1, -0.9, 0.5, 0.05),
            (100, 30, 2, 2, 1, 3, 2.9, 0.5, 0.05), (1000, 1000, 0, 0, 0, 3.4, 0.1, 1.0, 0.02),
            (20, 3, 1, 0, 0, 1, 0.5, 0.5, 0.2),
        ):  # fmt: skip
            if defn == "zcdp":
                e1, e2 = e1 * e1 / 2, e2 * e2 / 2
            pol = dl.Policy.from_toml(FLOWER.format(defn=defn, unit=unit, e1=e1, e2=e2, lo=lo,
                                                    hi=hi), source="fl.toml")  # fmt: skip
            health = np.array([rep, fail, rej], dtype=float)
            o, hr = (
                release(pol, "loss", planned, truth * rep),
                release(pol, "health", planned, health),
            )
            hits = pub = dhits = 0
            chits = np.zeros(3, dtype=int)
            for s, h in zip(draws(o, [truth * rep]), draws(hr, health), strict=True):
                _, iv = _mean(s, h, float(h.noisy_sum[0]), (float(lo), float(hi)))
                if iv.usable:
                    pub += 1
                    hits += int(iv.low <= truth <= iv.high)
                dhits += int(abs(health.sum() - h.noisy_sum.sum()) <= dropped_ci95(h))
                chits += np.abs(h.noisy_sum - health) <= ci95(h)
            cell = f"{defn} planned={planned} reporters={rep} clip=[{lo},{hi}] mean={truth}"
            line(f"flower mean {cell}", hits, pub)
            line(f"flower dropped {cell}", dhits, K)
            for name, c in zip(("reported", "failed", "rejected"), chits, strict=True):
                line(f"flower health {name} {cell}", int(c), K)


POOLED = """name = "pr"
version = "1"
neighbouring = "{neigh}"
definition = "{defn}"
epoch_{unit} = "100"
eval_fraction = "1"
[regions]
names = ["r"]
[metrics.pooled]
kind = "vector_sum"
{unit} = "{e}"
dimension = 3
cap_per_client = "3"
nonnegative = true
"""


def pooled() -> None:
    e_bound, m = 10.0, 20.0
    codec = spatial.pooled_ratio_codec(error_bound=e_bound, max_samples=m, cap=3.0)
    for neigh, defn in LAWS:
        unit, e = ("epsilon", 0.5) if defn == "pure" else ("rho", 0.125)
        pol = dl.Policy.from_toml(POOLED.format(neigh=neigh, defn=defn, unit=unit, e=e),
                                  source="pr.toml")  # fmt: skip
        b = release(pol, "pooled", 5, np.full(3, 0.1)).scale
        for scales in (2, 5, 20):
            for ratio in (0.5, 3.0):
                enc = np.array([ratio**2 * scales * b, scales * b, 0.5 * b])
                dec = codec.decode(enc)
                truth = min(math.sqrt(dec[0] / dec[1]), 10.0)
                n = math.ceil(enc.max()) + 1  # each coordinate's per-client bound: cap / 3 = 1
                rel = release(pol, "pooled", n, enc)
                for label, top in (("inf", math.inf), ("cohort", m * e_bound**2 * n)):
                    hits = pub = 0
                    for r in draws(rel, enc):
                        iv = spatial.pooled_ratio_interval(
                            r.noisy_sum, codec, r.interval_scale()[0], clip=10.0, max_along=top,
                            distribution=r.facts.mechanism,
                        )  # fmt: skip
                        if iv.reason is None:
                            pub += 1
                            hits += int(iv.low <= truth <= iv.high)
                    line(f"pooled {neigh} {defn} along={scales}b ratio={ratio} max={label}",
                         hits, pub)  # fmt: skip


if __name__ == "__main__":
    for name, part in (("scalar", scalar), ("hist", hist), ("gap", gap), ("flower", flower),
                       ("pooled", pooled)):  # fmt: skip
        if PART in ("all", name):
            part()
