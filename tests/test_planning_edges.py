"""Planning functions at the edges of a double: every refusal is an InvalidInput naming the
argument (audit5 F5: ValueError, OverflowError and TypeError escaped; an inf error bar was
returned), and numpy scalars are read as the real numbers they are."""

from __future__ import annotations

import math

import numpy as np
import pytest
from factories import SPATIAL, spatial

import dpledger as dl
from dpledger.errors import InvalidInput
from dpledger.planning import compare_definitions

VALUES = np.linspace(0.0, 5.0, 200)


def _zcdp() -> dl.Policy:
    body = SPATIAL.read_text(encoding="utf-8").replace('definition = "pure"', 'definition = "zcdp"')
    return dl.Policy.from_toml(body.replace('epoch_epsilon = "4.0"', 'epoch_rho = "0.5"'))


@pytest.mark.parametrize("zcdp", [False, True])
def test_a_target_met_by_any_budget_is_refused_by_name(zcdp: bool) -> None:
    policy = _zcdp() if zcdp else spatial()
    with pytest.raises(InvalidInput, match=r"target 1e\+308 for 'clipped_mean_loss'.*2\.2e-308"):
        dl.budget_for_target(policy, "clipped_mean_loss", 1e308, 100)


def test_required_budget_with_a_loose_policy_target_is_refused_by_name() -> None:
    body = SPATIAL.read_text(encoding="utf-8").replace("\ntarget = 0.1 ", "\ntarget = 1e308 ")
    policy = dl.Policy.from_toml(body)
    with pytest.raises(InvalidInput, match="target 1e\\+308 for 'clipped_mean_loss'"):
        dl.required_budget(policy, {"na": 100})


@pytest.mark.parametrize(
    ("sensitivity", "scale", "name"), [(1, 10**400, "noise scale"), (10**400, 1, "sensitivity")]
)
def test_budget_for_scale_refuses_an_integer_beyond_a_double_by_name(
    sensitivity: int, scale: int, name: str
) -> None:
    with pytest.raises(InvalidInput, match=name):
        dl.budget_for_scale(sensitivity, scale)
    with (
        pytest.warns(DeprecationWarning, match="deprecated"),
        pytest.raises(InvalidInput, match=name),
    ):
        dl.epsilon_for_scale(sensitivity, scale)


def test_budget_for_scale_refuses_text() -> None:
    with pytest.raises(InvalidInput, match="sensitivity must be a real number"):
        dl.budget_for_scale("1", 1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epsilon": 10**400}, "epsilon must be finite"),
        ({"low": 10**400}, r"low must lie within ±1e12"),
        ({"percentiles": 50}, r"percentiles must be a sequence.*got int 50"),
        ({"percentiles": None}, r"percentiles must be a sequence"),
        ({"percentiles": "50"}, r"percentiles must be a sequence"),
        ({"percentiles": ["50"]}, r"percentiles must be numbers"),
        ({"percentiles": [True]}, r"percentiles must be numbers"),
        ({"percentiles": [10**400]}, r"\[0, 100\], got \[inf\]"),
    ],
)
def test_calibrate_clip_refuses_bad_arguments_by_name(
    kwargs: dict[str, object], message: str
) -> None:
    args: dict[str, object] = {"epsilon": 1.0, "cohort": 100, **kwargs}
    with pytest.raises(InvalidInput, match=message):
        dl.calibrate_clip(VALUES, **args)  # type: ignore[arg-type]


def test_calibrate_clip_reads_numpy_scalars_as_numbers() -> None:
    plain = dl.calibrate_clip(VALUES, epsilon=1.0, cohort=100, low=1.0, percentiles=(90, 99))
    numpy = dl.calibrate_clip(
        VALUES,
        epsilon=np.float32(1.0),
        cohort=np.int64(100),
        low=np.float32(1.0),
        percentiles=np.array([90.0, 99.0], dtype=np.float32),
    )
    assert numpy.rows == plain.rows


def test_an_error_bar_beyond_a_double_is_refused_not_inf() -> None:
    with pytest.raises(InvalidInput, match=r"ci95 error bar.*beyond the range of a double"):
        dl.error_bar(1e308, 1.0, 100)
    assert math.isfinite(dl.error_bar(1e300, 1.0, 100))


def test_error_bar_reads_a_numpy_magnitude() -> None:
    assert dl.error_bar(1.0, 1.0, 100, magnitude=np.float32(2.0)) == dl.error_bar(
        1.0, 1.0, 100, magnitude=2.0
    )


def test_compare_definitions_names_the_metric_whose_converted_budget_underflows() -> None:
    # ε 2.5e-301 per release converts to a ρ (≈ ε²) far below the doubles' range
    text = (
        'name = "cd"\nversion = "1"\nneighbouring = "replace"\nepoch_epsilon = "1e-300"\n'
        '[regions]\nnames = ["na"]\n[metrics.loss]\nkind = "scalar_mean"\nweight = "1"\n'
        'clip = { low = "0", high = "0.001", source = "t" }\n'
    )
    policy = dl.Policy.from_toml(text)
    with pytest.raises(InvalidInput, match=r"metric 'loss': its converted per-release ρ at"):
        compare_definitions(policy, {"na": 1})


def _near_grid(defn: str, kind: str, budget: str = "1") -> dl.Policy:
    key = "epsilon" if defn == "pure" else "rho"
    if kind == "scalar":
        metric = 'kind = "scalar_mean"\nclip = { low = 0, high = 1e-9, source = "t" }\n'
    else:
        metric = (
            'kind = "vector_sum"\ndimension = 50\ncap_per_client = "1e-9"\nnonnegative = true\n'
        )
    return dl.Policy.from_toml(
        f'name = "grid"\nversion = "1"\nneighbouring = "replace"\ndefinition = "{defn}"\n'
        f'epoch_{key} = "1e9"\neval_fraction = "1"\nallocation = "pooled"\n'
        f'[regions]\nnames = ["r"]\n[metrics.s]\n{metric}{key} = "{budget}"\n'
        'target = 3e-10\nbar = "ci95"\n'
    )


@pytest.mark.filterwarnings("ignore::dpledger.PolicyWarning")
@pytest.mark.parametrize(("defn", "kind", "n"), [("pure", "scalar", 100), ("zcdp", "vector", 2400)])
def test_the_budget_for_a_target_meets_it_at_the_calibrated_scale(
    defn: str, kind: str, n: int
) -> None:
    """stats6, F-PLAN: near OpenDP's grid the closed form Δ/ε is less noise than the ledger
    calibrates, so the budget returned was refused at its own cohort (bar 0.06–0.45% over
    the target); it is now searched at the calibrated scale, as the approval check reads it."""
    need = dl.budget_for_target(_near_grid(defn, kind), "s", 3e-10, n)
    policy = _near_grid(defn, kind, repr(float(need.amount)))
    facts, charge = dl.mechanisms.mechanism_facts(policy, "s")
    spec = policy.metric("s")
    target = 3e-10
    assert charge <= need.amount
    assert dl.mechanisms.error_bar_of(facts, n, spec.bar, spec.magnitude) <= target
