# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Cohort floors: how many clients a region needs before it may publish
#
# A released mean over n clients carries Laplace noise of scale b = Δ/(ε·n), so its 95%
# half-width is ln(20)·Δ/(ε·n): it falls as 1/n. A metric is worth publishing only when
# that bar is smaller than the regression you must be able to detect. The **cohort
# floor** is the smallest n whose bar meets the target; below it the ledger refuses the
# release. The floor is set from the error-bar requirement, not from a privacy intuition.
#
# This notebook draws the bar against n for every metric of the shipped policy at its
# per-release ε, reads off each floor, shows what a tighter target costs, and checks the
# ledger's approval against the floor.

# %%
# %matplotlib inline
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import dpledger as dl
from dpledger.sim.fleet import make_fleet

policy = dl.Policy.load(Path("../policies/spatial-eval.toml"))
fleet = make_fleet(n_clients=20_000, seed=0, regions=policy.regions.names)
cohorts = {r: len(fleet.client_range(r)) for r in fleet.regions}
plan = dl.plan(policy, cohorts=cohorts)
rows = {m.metric: m for m in plan.region("eu-west").metrics}  # per-metric facts
print(f"ε_eval = {float(plan.eval_budget):g} per client per epoch; cohorts: {cohorts}")
print(f"{'metric':<20}{'ε/release':>10}{'Δ':>8}{'target (ci95)':>15}{'floor':>7}")
for name, r in rows.items():
    print(
        f"{name:<20}{float(r.budget_per_release):>10g}{r.sensitivity:>8g}"
        f"{r.target:>15g}{r.cohort_floor:>7}"
    )

# %% [markdown]
# Units of Δ and of the bar: loss units (mean loss), a dimensionless ratio
# (along/across), samples per client per bucket (error histogram, L1 cap 40, so Δ₁ = 80
# under `replace`), gap sums and counts per client (calibration gap), and the fraction of
# clients per bucket (coverage). Every metric gets ε = 0.2: the five share ε_eval = 1.
#
# ## Error bar against cohort size
#
# Each panel is one metric: its ci95 bar against n (log-log, slope −1), the policy's
# target, the floor, and the regions' cohorts (apac is the planted small region).

# %%
n = np.logspace(1, 5, 200)
sized = {}  # regions of (nearly) the same size share one label
for region, size in cohorts.items():
    key = next((s for s in sized if abs(s - size) <= 0.01 * s), size)
    sized[key] = f"{sized[key]}/{region}" if key in sized else region
fig, axes = plt.subplots(1, len(rows), figsize=(13, 2.8), sharex=True)
for ax, (name, r) in zip(axes, rows.items(), strict=True):
    eps = r.budget_per_release
    ax.loglog(n, dl.error_bar(r.sensitivity, eps, 1, r.bar) / n, label="ci95 bar")
    ax.axhline(r.target, color="tab:red", ls="--", lw=1, label="target")
    ax.axvline(r.cohort_floor, color="black", ls=":", lw=1, label="floor")
    for size, regions in sized.items():
        at = (size, dl.error_bar(r.sensitivity, eps, size, r.bar))
        ax.plot(*at, "o", ms=4, color="tab:purple")
        ax.annotate(regions, at, fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_title(f"{name}\nfloor n = {r.cohort_floor:,}", fontsize=9)
    ax.set_xlabel("cohort n (clients)", fontsize=8)
    ax.tick_params(labelsize=7)
axes[0].set_ylabel("ci95 half-width (metric units)", fontsize=8)
axes[0].legend(frameon=False, fontsize=7)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## The floor for the regression you must detect
#
# The target is a product decision: "a loss regression of 0.05 must be visible" means the
# bar must be at most 0.05. The floor grows as 1/target, and as 1/ε: halving the smallest
# detectable regression doubles the cohort a region needs. The table also shows the ε one
# release would need for the planted small region (apac) to reach the same bar.

# %%
loss = rows["clipped_mean_loss"]
small = min(cohorts, key=cohorts.get)
regressions = (0.2, 0.1, 0.05, 0.02)  # loss units
floors = [dl.cohort_floor(loss.sensitivity, loss.budget_per_release, t) for t in regressions]
print(f"clipped_mean_loss at ε = {float(loss.budget_per_release):g}, Δ = {loss.sensitivity:g}")
print(
    f"{'regression':>11}{'floor n':>9}{'bar at floor':>14}"
    f"{'ε needed at ' + small + f' (n={cohorts[small]})':>28}"
)
for t, f in zip(regressions, floors, strict=True):
    need = dl.budget_for_target(policy, "clipped_mean_loss", t, cohorts[small])
    bar = dl.error_bar(loss.sensitivity, loss.budget_per_release, f)
    print(f"{t:>11g}{f:>9,}{bar:>14.4f}{float(need):>28.3g}")
print()
print(plan.table())

# %% [markdown]
# ## Does the ledger agree?
#
# The floor is only useful if the approval check enforces exactly it. A dry run
# (`Ledger.check`, nothing is spent) on a temporary SQLite ledger, for every metric at
# n = floor and n = floor − 1, with an all-zero aggregate (valid for every kind):

# %%
verdicts = {}
with (
    tempfile.TemporaryDirectory() as tmp,
    dl.Ledger.open(Path(tmp, "floor.db"), policy, mode="create") as ledger,
):
    for name, r in rows.items():
        spec = policy.metric(name)
        for size in (r.cohort_floor - 1, r.cohort_floor):
            request = dl.ReleaseRequest(
                epoch=0,
                metric=name,
                region="eu-west",
                cohort=size,
                edges_version=spec.edges_version,
                policy_version=policy.version,
            )
            verdict = ledger.check(request, np.zeros(spec.size))
            check = next(c for c in verdict.checks if c.name == "cohort_floor")
            verdicts[name, size] = verdict.approved
            print(f"{name:<20} n={size:<6} {check.status:<5} {check.reason}")


# %% [markdown]
# ## Conclusion
#
# Asserted below, for every metric of the policy (and for each loss regression above):
# the floor is the smallest n whose bar meets the target (the bar at the floor is within
# target, one client fewer is not), the planner's floor is `cohort_floor`'s, and the
# ledger approves at the floor and refuses one client below it.
#
# **Action:** with the shipped policy a region needs about 1,200 clients before it can
# publish the full metric set (the error histogram and calibration gap set the floor;
# the mean loss alone needs about 510). The planted small region (apac, 150 clients)
# cannot publish anything: merge it with a neighbour or aggregate it over a longer
# window. To detect a smaller regression, budget for the cohort: the floor scales as
# 1/(ε·target).


# %%
def is_floor(delta, eps, target, floor, bar="ci95"):
    # smallest n meeting the target: the bar at n meets it, at n - 1 it does not
    ok = dl.error_bar(delta, eps, floor, bar) <= target
    return ok and (floor == 1 or dl.error_bar(delta, eps, floor - 1, bar) > target)


for name, r in rows.items():
    floor = dl.cohort_floor(r.sensitivity, r.budget_per_release, r.target, r.bar)
    assert floor == r.cohort_floor, (name, floor, r.cohort_floor)
    assert is_floor(r.sensitivity, r.budget_per_release, r.target, floor, r.bar), name
    assert verdicts[name, floor], f"{name}: the ledger refuses n = floor"
    assert not verdicts[name, floor - 1], f"{name}: the ledger approves n = floor - 1"
for t, f in zip(regressions, floors, strict=True):
    assert is_floor(loss.sensitivity, loss.budget_per_release, t, f), t
assert floors == sorted(floors), "a smaller regression needs a larger cohort"
region_floor = max(r.cohort_floor for r in rows.values())
publishable = {r.region: all(m.publishable for m in r.metrics) for r in plan.regions}
assert publishable == {k: v >= region_floor for k, v in cohorts.items()}, publishable
print(
    f"a region publishes the full metric set from n = {region_floor:,}; publishable: {publishable}"
)
