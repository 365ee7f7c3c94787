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
# # Choosing a clip bound from a held-out fleet
#
# The mean loss is released as a noisy sum over the cohort. Each client clips its own
# mean loss to `[0, clip_high]` on the device, so under the policy's `replace` relation
# the sensitivity is Δ = `clip_high` (loss units) and the Laplace noise on the published
# mean has scale b = Δ / (ε·n). **The clip bound is the noise**: double it and every
# release is twice as noisy. Set it too low and the metric is biased instead, because
# every client above the bound is reported at the bound.
#
# This notebook picks `clip_high` for `clipped_mean_loss` in
# `policies/spatial-eval.toml` from a *held-out* fleet (never from the data being
# released): the p50…p100 candidates, the RMSE-optimal bound, and how much each choice
# moves from one held-out draw to the next.

# %%
# %matplotlib inline
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import dpledger as dl
from dpledger.sim.scenarios import held_out_losses

policy = dl.Policy.load(Path("../policies/spatial-eval.toml"))
spec = policy.metric("clipped_mean_loss")
EPSILON = float(policy.release_budget("clipped_mean_loss"))  # ε of one release
COHORT = 2000  # clients in one published mean
held_out = held_out_losses(2000, seed=0)  # one mean loss per held-out client
print(f"ε per release = {EPSILON:g}, cohort n = {COHORT:,}, target bar = {spec.target}")
print(f"policy today: clip_high = {float(spec.clip.high):g} ({spec.clip.source})")

# %% [markdown]
# ## The candidates
#
# `calibrate_clip` reports, per candidate percentile of the held-out values: the bound,
# the share of held-out clients it clips, the noise scale b on the published mean, the
# clipping bias (clipped mean − raw mean, on the held-out fleet) and
# RMSE = √(bias² + 2b²) (a Laplace variance is 2b²). Noise and bias are in loss units,
# shown ×1000.

# %%
cal = dl.calibrate_clip(held_out, epsilon=EPSILON, cohort=COHORT, source="held-out seed 0")
print(cal.table())

labels = [f"p{r.percentile:g}" for r in cal.rows]
noise = np.array([1000 * r.noise_scale for r in cal.rows])
clipped = np.array([100 * r.clipped_fraction for r in cal.rows])
x = np.arange(len(labels))
fig, ax = plt.subplots(figsize=(6.5, 3.2))
for dx, heights, label in (
    (-0.2, noise, "noise on the published mean (×1000, loss units)"),
    (0.2, clipped, "% of held-out clients clipped"),
):
    ax.bar_label(ax.bar(x + dx, heights, 0.4, label=label), fmt="%.1f", fontsize=8)
ax.set_xticks(x, labels)
ax.set_ylabel("noise ×1000  /  %")
ax.set_title(f"Where to put the clip bound (n = {COHORT:,}, ε = {EPSILON:g})", fontsize=10)
ax.legend(frameon=False, fontsize=8)
plt.show()

# %% [markdown]
# The median clips half of the clients; the maximum clips nobody but buys that with the
# largest noise, because the noise is proportional to the bound. Between them the
# noise/bias trade-off decides. The five candidates are coarse, so scan p90…p100 in steps
# of 0.1 for the bound with the lowest RMSE and compare it with the usual default, p99.

# %%
FINE = np.round(np.arange(90.0, 100.05, 0.1), 1)  # candidate percentiles
fine = dl.calibrate_clip(held_out, epsilon=EPSILON, cohort=COHORT, percentiles=FINE)
best, p99 = fine.recommended, fine.row(99)
print(f"RMSE-optimal: p{best.percentile:g} = {best.bound:.2f}, RMSE {1000 * best.rmse:.1f}e-3")
print(
    f"p99:          p99 = {p99.bound:.2f}, RMSE {1000 * p99.rmse:.1f}e-3 "
    f"({p99.rmse / best.rmse:.2f}× the optimum), bias {1000 * p99.bias:.1f}e-3"
)

bounds = np.array([r.bound for r in fine.rows])
fig, ax = plt.subplots(figsize=(6.5, 3))
for key, label in (("rmse", "RMSE"), ("bias", "|bias|"), ("noise_scale", "noise b")):
    ax.plot(bounds, [1000 * abs(getattr(r, key)) for r in fine.rows], label=label)
ax.axvline(p99.bound, color="grey", ls=":", label="p99")
ax.axvline(best.bound, color="black", ls="--", label=f"optimum p{best.percentile:g}")
ax.set(xscale="log", xlabel="clip bound (loss units, log scale)", ylabel="×1000 loss units")
ax.set_xticks([1, 2, 3, 5, 10, 20], labels=["1", "2", "3", "5", "10", "20"])
ax.minorticks_off()
ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
plt.show()

# %% [markdown]
# ## Is the choice stable?
#
# The held-out fleet is a sample. A bound set at a high percentile rests on a handful
# of clients (p99.7 of 2,000 is the 7th largest value; the maximum is one client), so
# redraw ten held-out fleets and see how far each rule's bound moves. Because ε and n are
# the same, the noise ratio of two bounds is just the ratio of the bounds.

# %%
draws = [
    dl.calibrate_clip(
        held_out_losses(2000, seed=s), epsilon=EPSILON, cohort=COHORT, percentiles=FINE
    )
    for s in range(10)
]
p99_b = np.array([d.row(99).bound for d in draws])
max_b = np.array([d.row(100).bound for d in draws])
best_b = np.array([d.recommended.bound for d in draws])
best_pct = np.array([d.recommended.percentile for d in draws])
rmse_penalty = np.array([d.row(99).rmse / d.recommended.rmse for d in draws])
noise_ratio = max_b / p99_b  # noise at the max ÷ noise at p99
print("seed   p99    max   max/p99   optimum  bound   p99 RMSE ÷ optimum")
for s in range(10):
    print(
        f"{s:>4} {p99_b[s]:6.2f} {max_b[s]:6.1f} {noise_ratio[s]:7.1f}×   "
        f"p{best_pct[s]:<5g} {best_b[s]:6.2f}   {rmse_penalty[s]:.2f}"
    )
for name, b in (("p99", p99_b), ("optimum", best_b), ("max", max_b)):
    print(f"{name:>8} bound ranges {b.min():.2f}–{b.max():.2f} ({b.max() / b.min():.1f}×)")

# %% [markdown]
# ## Conclusion
#
# The next cell asserts the conclusion, so the notebook fails if it stops holding:
#
# * the median clips half the fleet, and its bias is larger than the policy's whole
#   error-bar target: never clip at the median;
# * clipping at the maximum costs at least 10× the noise of p99 in the typical draw (and
#   never less than 5×), and the maximum itself swings by an order of magnitude between
#   held-out draws: never clip at the maximum;
# * the RMSE-optimal bound is never below p99 (it sits at p99.6–p99.8) and p99 stays within
#   about 1.5× of its RMSE, while p99's bound is by far the most stable of the three rules;
# * the shipped policy's `clip_high = 3.4` lies within the range of p99 over the draws.
#
# **Action:** set `clip_high` to the p99 of a held-out fleet and record its provenance
# (the TOML line is printed below). Re-run this notebook when ε per release or the cohort
# changes; if you move above p99, take the median bound over several held-out draws.

# %%
target = spec.target  # ci95 half-width on the mean loss, loss units
assert abs(cal.row(50).clipped_fraction - 0.50) < 0.01, "the median clips half the fleet"
assert abs(cal.row(99).clipped_fraction - 0.01) < 0.002, "p99 clips 1% of the fleet"
assert abs(cal.row(99).bias) < target < abs(cal.row(50).bias)
assert np.median(noise_ratio) >= 10, noise_ratio
assert noise_ratio.min() >= 5, noise_ratio
assert max_b.max() / max_b.min() >= 5, "the maximum is an unstable statistic"
assert (best_pct >= 99).all(), best_pct
assert (rmse_penalty < 1.6).all(), rmse_penalty
spread = {
    name: b.max() / b.min() for name, b in (("p99", p99_b), ("optimum", best_b), ("max", max_b))
}
assert spread["p99"] == min(spread.values()), spread
assert spread["p99"] < 1.5, spread
assert p99_b.min() <= float(spec.clip.high) <= p99_b.max(), "the shipped clip is a p99"

clip = cal.to_clip(99)
print(
    f"median noise ratio max/p99 = {np.median(noise_ratio):.1f}× "
    f"(range {noise_ratio.min():.1f}–{noise_ratio.max():.1f}×); "
    f"p99 RMSE ≤ {rmse_penalty.max():.2f}× the optimum"
)
print(
    f'clip = {{ low = "{float(clip.low):g}", high = "{float(clip.high):g}", '
    f'source = "{clip.source}" }}'
)
