"""A policy whose derived per-release budgets (or targets) no release could meet is refused
at load; one that loads always calibrates, with finite error bars and cohort floors."""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import factories
import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger import mechanisms as mech
from dpledger.errors import InvalidInput, PolicyError
from dpledger.policy import limits


def _scalar(budget: str, *, high: str = "3.4", extra: str = "", zcdp: bool = False) -> str:
    head = 'definition = "zcdp"\nepoch_rho' if zcdp else "epoch_epsilon"
    return f"""
name = "edge"
version = "1"
neighbouring = "replace"
{head} = "{budget}"
{extra}
[regions]
names = ["na"]
[metrics.loss]
kind = "scalar_mean"
clip = {{ low = "0", high = "{high}", source = "t" }}
weight = "1"
"""


def test_a_per_release_epsilon_whose_noise_scale_overflows_is_refused_at_load() -> None:
    # audit F1: ε 3.4e-308 per release at Δ 3.4 loaded, then plan/release were exit 3
    with pytest.raises(PolicyError, match=r"metric 'loss'.*3\.4e-308.*beyond the range"):
        dl.Policy.from_toml(_scalar("1.36e-307"))


def test_rounds_that_leave_a_histogram_no_finite_scale_are_refused_at_load() -> None:
    text = SPATIAL.read_text(encoding="utf-8")
    text = text.replace('epoch_epsilon = "4.0"', 'epoch_epsilon = "1e-300"')
    text = text.replace("\nrounds_per_epoch = 1\n", "\nrounds_per_epoch = 100000\n")
    assert "100000" in text
    with pytest.raises(PolicyError, match=r"'error_histogram'.*5e-307.*rounds_per_epoch"):
        dl.Policy.from_toml(text)


@pytest.mark.parametrize(("eps", "shown"), [("4.0", "1e-309"), ("1e-300", "≈1e-")])
def test_a_weight_share_below_the_smallest_normal_double_is_refused_at_load(
    eps: str, shown: str
) -> None:
    text = _scalar(eps) + (
        '[metrics.big]\nkind = "scalar_mean"\nclip = { low = "0", high = "1", source = "t" }\n'
        'weight = "1000000000"\n'
    )
    text = text.replace('weight = "1"\n', 'weight = "1e-300"\n', 1)
    with pytest.raises(PolicyError, match=rf"metric 'loss'.*{shown}.*smallest normal.*weight"):
        dl.Policy.from_toml(text)


def test_a_target_below_the_doubles_rounding_is_refused_at_load() -> None:
    text = SPATIAL.read_text(encoding="utf-8").replace("\ntarget = 0.1 ", "\ntarget = 1e-300 ")
    assert "1e-300" in text
    with pytest.raises(PolicyError, match=r"'clipped_mean_loss'.*target 1e-300.*rounding"):
        dl.Policy.from_toml(text)


def test_a_target_no_cohort_below_2_62_reaches_is_refused_at_load() -> None:
    text = _scalar("1e-6") + "target = 1e-14\n"  # scale 1.4e7: floor ≈ 5e21
    with pytest.raises(PolicyError, match=r"'loss'.*target 1e-14.*2\*\*62"):
        dl.Policy.from_toml(text)


@pytest.mark.parametrize("side", [1.0001, 0.9999])
def test_a_policy_at_the_edge_loads_only_if_it_calibrates_with_finite_bars(side: float) -> None:
    # at Δ = 100 (replace, clip [0, 100]) a per-release ε of 3·Δ/max-double is the edge
    # (under zCDP a ρ ≥ 2.2e-308 never overflows: σ ≤ Δ·4.8e153)
    budget = 3 * 100.0 / sys.float_info.max * side
    text = _scalar(f"{budget / 0.25!r}", high="100").replace(
        "[metrics.loss]\n", "[metrics.loss]\ntarget = 1e300\n"
    )
    if side < 1:
        with pytest.raises(PolicyError, match="beyond the range of a double"):
            dl.Policy.from_toml(text)
        return
    policy = dl.Policy.from_toml(text)
    facts, _ = mech.mechanism_facts(policy, "loss")
    for bar in mech.BAR_KINDS:
        assert math.isfinite(mech.error_bar_of(facts, 1, bar, 100.0))
    floor = mech.cohort_floor_of(facts, 1e300, "ci95", 100.0)
    row = dl.plan(policy, cohorts={"na": 1}).rows[0]
    assert row.error_bar is not None
    assert math.isfinite(row.error_bar)
    assert row.cohort_floor == floor


def test_calibrate_refuses_a_budget_no_double_scale_meets_with_a_typed_error() -> None:
    # the closed form is the largest double; OpenDP's map there overshoots the budget
    with pytest.raises(InvalidInput, match="no noise scale within the range of a double"):
        mech.calibrate(
            sensitivity=sys.float_info.max,
            budget=Fraction(1),
            measure="epsilon",
            mechanism="laplace",
            dimension=0,
        )


def test_a_recorded_policy_is_read_as_it_was_accepted() -> None:
    text = _scalar("1.36e-307")
    with pytest.raises(PolicyError):
        dl.Policy.from_toml(text)
    data = dl.Policy.from_toml(_scalar("1")).model_dump(mode="json")
    data["epoch_epsilon"] = "34/250000000000000000000" + "0" * 290
    policy = dl.Policy.from_mapping(data, recorded=True)
    assert policy.release_budget("loss") < Fraction(1, 10**307)


def _policies() -> list[dl.Policy]:
    text = SPATIAL.read_text(encoding="utf-8")
    out = [dl.Policy.load(p) for p in sorted(SPATIAL.parent.glob("*.toml"))]
    out.append(dl.Policy.from_toml(text.replace('"replace"', '"add_remove"')))
    zcdp = text.replace('definition = "pure"', 'definition = "zcdp"')
    zcdp = zcdp.replace('epoch_epsilon = "4.0"', 'epoch_rho = "0.5"')
    out.append(dl.Policy.from_toml(zcdp))
    out += [factories.policy(neighbouring=r) for r in ("replace", "add_remove")]
    return out


@pytest.mark.parametrize("policy", _policies(), ids=lambda p: f"{p.name}-{p.neighbouring}")
def test_the_load_checks_sensitivity_bound_covers_every_release_sensitivity(
    policy: dl.Policy,
) -> None:
    for name, spec in policy.metrics.items():
        assert limits._sensitivity_bound(policy, spec) >= mech.policy_sensitivity(policy, name) / (
            1 + 1e-9
        ), name
