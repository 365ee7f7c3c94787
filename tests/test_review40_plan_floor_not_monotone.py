"""Review 40 (planning): an approved cohort above the floor can print a bar above target.

The floor is the least n whose bar, computed as a release computes it
(``(f·s + (slack + n·r)) / n`` in doubles, r = magnitude · 2⁻⁵¹), is ≤ the target. In
exact arithmetic that bar falls with n; in doubles it can rise by an ulp from n to n + 1
where the rounding term r dominates it (values near 1e6 clipped to a width of 1e-9,
cohorts near 1e9). Then a cohort above the floor is approved ("n ≥ floor", ``plan`` says
publishable) and its release prints a bar one ulp above the target: here n = floor + 2.

Not fixed here: the floor would have to be the least n from which *every* larger bar
meets the target, and the window to search for that (≈ 9·2⁻⁵³·target·n²/(f·s)) can be
~1e15 cohorts in the same regime; the lasting fix is a bar monotone in n, computed the
same way by ``Release.make`` (dpledger/ledger/records.py) and ``error_bar_for_scale``,
e.g. ``(f·s + slack)/n + r``, which is outside the planning modules. Deterministic.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import dpledger as dl

TARGET = 4.386066306357048e-10
FLOOR = 868_835_590
POLICY = f"""
name = "x"
version = "1"
neighbouring = "replace"
definition = "pure"
epoch_epsilon = "1"
eval_fraction = "1"
[regions]
names = ["a"]
[metrics.m]
kind = "scalar_mean"
epsilon = "1"
clip = {{ low = "987654.321", high = "987654.321000001", source = "t" }}
target = {TARGET!r}
"""


@pytest.mark.xfail(
    strict=True,
    reason="the bar in doubles is not monotone in n: an ulp above target above the floor "
    "(needs a monotone bar in Release.make and _bars together; see the module docstring)",
)
def test_every_approved_cohort_prints_a_bar_within_its_target(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        policy = dl.Policy.from_toml(POLICY, source="t.toml")
    assert dl.plan(policy, cohorts={"a": 10}).rows[0].cohort_floor == FLOOR
    n = FLOOR + 2
    assert dl.plan(policy, cohorts={"a": n}).rows[0].publishable
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        release = ledger.release(
            dl.ReleaseRequest(epoch=0, metric="m", region="a", cohort=n), 987654.321 * n
        )
    assert release.error_bar <= TARGET
