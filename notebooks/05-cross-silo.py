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
# # Cross-silo evaluation: a record-level privacy unit for 20 hospitals
#
# Twenty hospitals evaluate one model on their patients' records. With the privacy
# unit fixed to one *client*, each hospital is a client and a release must hide a whole
# hospital's contribution: to keep every record (FLAM-exact metrics), a client's bound
# has to be as large as the largest hospital, and the noise with it. What the
# hospitals must protect is a *patient*. Under `privacy_unit = "record"` a release
# hides one person's records — at most `max_records_per_person` of them, which each
# silo enforces before summing — and the noise shrinks by the ratio of the two bounds.
#
# This notebook splits scikit-learn's digits (classification) and diabetes (regression)
# over 20 hospitals with a Dirichlet(0.3) skew, shows the bars of one release under
# each unit side by side, and ends with what record-level DP does **not** protect.

# %%
# %matplotlib inline
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes, load_digits
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import accuracy_score

import dpledger as dl
from dpledger.metrics import classification_metrics, records
from dpledger.planning.units import client_twin, compare_units, units_table
from dpledger.sim.silos import Federation, dirichlet_silos

policy = dl.Policy.load("../policies/cross-silo.toml")
SILOS = list(policy.regions.names)
print(policy.protects)

# %% [markdown]
# ## The plan, fixed before the round: about 200 records per hospital
#
# Under `add_remove` the record count is private: one patient's presence changes it. A
# release's `cohort` is recorded in the ledger and published with the release, so it
# must be a number fixed *before* the round from public facts — never the count of the
# records the silos summed. That count moves by one with one patient: publishing it
# would tell a data set from its neighbour with no noise at all, whatever ε the release
# spent on its values.
#
# The study plan expects at most `QUOTA` records per hospital, so the planned cohort is
# `QUOTA × 20`. The quota is a plan, not a cap to truncate to: each hospital sums all its
# records. Keeping only its first `QUOTA` would let one more patient push another's record
# out where the quota binds — a change of two records, which the ledger's ε would
# understate by half (2ε by group privacy). Nor is truncation needed: one patient more or
# less moves a sum by one record's bound however many records it holds, so the charge holds
# for any count. A count above the plan would only bias a mean taken over the planned count
# (the metrics below divide by the released noisy count instead). So the quota is set above
# any hospital's expected enrolment, and this simulation checks that it held.

# %%
QUOTA = 200  # records per hospital, from the study plan: public, fixed before the round
PLANNED_RECORDS = QUOTA * len(SILOS)  # the cohort of every release over all hospitals


def within_quota(fed: Federation) -> Federation:
    """The plan held (a check of the simulation's private sizes): no hospital has more
    than QUOTA records. Never enforced by truncation, which would double one patient's
    effect where it binds."""
    assert int(fed.sizes.max()) <= QUOTA, "the plan's quota is below a hospital's enrolment"
    return fed


print(f"planned: about {QUOTA} records per hospital at most, cohort {PLANNED_RECORDS}")

# %% [markdown]
# ## 20 hospitals, very different sizes and case mixes
#
# Each digit class is shared between hospitals in Dirichlet(0.3) proportions. A model
# trained on half of the records is evaluated on all of them.

# %%
x, y = load_digits(return_X_y=True)
model = LogisticRegression(max_iter=300).fit(x[::2] / 16, y[::2])
fed = within_quota(dirichlet_silos(y, len(SILOS), alpha=0.3, seed=1))
y_true, y_pred = y[fed.order], model.predict(x / 16)[fed.order]

# silo side: one count per record, one summed 10×10 matrix per hospital
silo_sums = records.record_confusion(y_true, y_pred, n_classes=10, offsets=fed.offsets)
assert silo_sums.records.max() <= QUOTA  # so the total never exceeds PLANNED_RECORDS
truth = classification_metrics(silo_sums.total(), labels="all")
assert abs(truth["accuracy"] - accuracy_score(y_true, y_pred)) < 1e-12  # FLAM-exact
# the simulation's view only: each silo's exact count stays in the silo, never published
print(f"silo sizes (simulation only) {sorted(fed.sizes.tolist())}")
print(f"true accuracy {truth['accuracy']:.4f}, macro-F1 {truth['f1_macro']:.4f}")

# %% [markdown]
# ## The bars before the round: `dpledger plan --compare-units`
#
# For the planned record counts (each hospital's quota), the same budgets under each
# unit. The client-level twin of the policy bounds each hospital by its quota, the most
# records it can contribute (so that no record is clipped away); the record-level policy
# bounds one person's records.

# %%
planned = dict.fromkeys(SILOS, QUOTA)
comparison = compare_units(policy, planned)
print(units_table(comparison))

# %% [markdown]
# ## One release under each unit, through real ledgers
#
# Client-level: the twin policy, a release over all 20 hospitals (cohort = 20 clients).
# Record-level: the shipped policy, the same summed matrix (cohort = `PLANNED_RECORDS`,
# the planned count, not the number of records summed: see the plan above). Derived
# metrics divide by the release's noisy total, never by either count.

# %%
workdir = Path(tempfile.mkdtemp())
twin = client_twin(policy, QUOTA)
releases = {}
for unit, pol, cohort in (("client", twin, len(SILOS)), ("record", policy, PLANNED_RECORDS)):
    with dl.Ledger.open(workdir / f"{unit}.db", pol, mode="create") as ledger:
        request = dl.ReleaseRequest(
            epoch=0, metric="digits_confusion", region=dl.ALL, cohort=cohort
        )
        releases[unit] = dl.release_confusion(ledger, request, silo_sums.total())
        assert ledger.verify().ok
        assert ledger.entries()[0].privacy_unit == unit
    print(f"--- {unit}-level: {pol.protects}")
    print(releases[unit].table())

# %%
shown = ["accuracy", "balanced_accuracy", "f1_macro", "mcc"]
fig, ax = plt.subplots(figsize=(8, 3.5))
for j, (unit, out) in enumerate(releases.items()):
    pos = np.arange(len(shown)) + (j - 0.5) * 0.35
    mid = [truth[k] for k in shown]
    lo = [out.intervals[k].low for k in shown]
    hi = [out.intervals[k].high for k in shown]
    ax.bar(pos, np.subtract(hi, lo), 0.3, bottom=lo, alpha=0.5, label=f"{unit}-level 95% interval")
ax.scatter(np.arange(len(shown)), [truth[k] for k in shown], color="k", zorder=3, label="truth")
ax.set_xticks(np.arange(len(shown)), shown)
ax.set_ylim(-1.05, 1.05)
ax.set_title(f"digits over 20 hospitals (≤ {QUOTA} records each), ε = 0.5 per release")
ax.legend(loc="lower left", fontsize=8)
plt.show()

# %% [markdown]
# ## Regression: diabetes, 442 records
#
# Each record's y and ŷ are clipped to the declared ranges (`y_clip`, `y_pred_clip`), so
# its five measures fit the codec and its encoded row has L1 ≤ `cap_per_record`. The
# same plan holds (at most `QUOTA` records per hospital, cohort `PLANNED_RECORDS`); the
# release's `n` is a noisy count. The records' measures are summed on a fixed grid, and
# `sum_error` bounds what that truncation moves the sum by: passed as `aggregate_error`,
# it widens the bars (here by far less than the noise). With only 442 records the
# record-level bars are honest but wide: R² needs more records (or more ε) than this
# data set has.

# %%
xd, yd = load_diabetes(return_X_y=True)
pred = LinearRegression().fit(xd, yd).predict(xd)
fed_d = within_quota(dirichlet_silos(np.zeros(yd.size, np.int64), len(SILOS), alpha=0.3, seed=5))
spec = policy.metric("diabetes_regression")
assert spec.y_clip is not None
assert spec.y_pred_clip is not None
clips = {
    "y_clip": (float(spec.y_clip.low), float(spec.y_clip.high)),
    "y_pred_clip": (float(spec.y_pred_clip.low), float(spec.y_pred_clip.high)),
}
reg = records.record_regression(yd[fed_d.order], pred[fed_d.order], cap=1.0,
                                offsets=fed_d.offsets, **clips)  # fmt: skip
assert reg.records.max() <= QUOTA
with dl.Ledger.open(workdir / "record.db", policy, mode="write") as ledger:
    request = dl.ReleaseRequest(
        epoch=0, metric="diabetes_regression", region=dl.ALL, cohort=PLANNED_RECORDS
    )
    reg_out = dl.release_regression(  # the grid's truncation error, public: in the bars
        ledger, request, reg.total(), spec.record_regression_codec(),
        aggregate_error=reg.sum_error(PLANNED_RECORDS),
    )  # fmt: skip
print(reg_out.table())

# %% [markdown]
# ## What record-level DP does **not** protect
#
# - **A silo's aggregate statistics.** A release bounds what one person's records can
#   change, not what a whole hospital can: its size, its case mix, its model's accuracy
#   on its own patients are *not* hidden — a per-hospital release shows them within the
#   noise of a few records. Use the client level where a hospital's aggregate is itself
#   the secret.
# - **A person with more records than declared, as a whole.** Each silo keeps at most
#   `max_records_per_person` records per person (the first ones, in a listed order of
#   that person's own records): the guarantee covers those. A person present in several
#   hospitals is bounded in each, so their protection degrades with the number of
#   hospitals unless `max_records_per_person` counts all of them; a patient under two
#   unlinked ids is two persons.
# - **Membership of a hospital in the federation**, and anything published outside the
#   ledger.

# %%
client_acc, record_acc = (releases[u].intervals["accuracy"] for u in ("client", "record"))
client_width = client_acc.high - client_acc.low
record_width = record_acc.high - record_acc.low
ratio = next(r.ratio for r in comparison if r.metric == "digits_confusion")
assert record_width < 0.1, record_width
assert client_width > 4 * record_width, (client_width, record_width)
# a hospital's quota (the most records it contributes) over 1 record per person
assert abs(ratio / QUOTA - 1) < 1e-9, ratio
print(
    f"accuracy {truth['accuracy']:.3f}: record-level interval "
    f"[{record_acc.low:.3f}, {record_acc.high:.3f}] (width {record_width:.3f}), "
    f"client-level [{client_acc.low:.3f}, {client_acc.high:.3f}] (width {client_width:.3f}); "
    f"noise ratio {ratio:.0f}x"
)
