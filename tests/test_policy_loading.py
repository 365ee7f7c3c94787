"""Loading a policy: typed errors for what is not a path or text, and load-time warnings."""

from __future__ import annotations

import warnings

import pytest

from dpledger import Policy, PolicyError, PolicyWarning
from dpledger import plan as dl_plan


@pytest.mark.parametrize("path", [None, 5, b"policies/spatial-eval.toml", 1.5])
def test_load_of_something_that_is_not_a_path_is_a_policy_error(path: object) -> None:
    with pytest.raises(PolicyError, match="expected a policy file path"):
        Policy.load(path)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [None, b'name = "x"', 5])
def test_from_toml_of_something_that_is_not_text_is_a_policy_error(text: object) -> None:
    with pytest.raises(PolicyError, match="TOML text as a str"):
        Policy.from_toml(text)  # type: ignore[arg-type]


OVERCOMMITTED = """
name = "oc"
version = "1"
neighbouring = "replace"
epoch_epsilon = "4"
rounds_per_epoch = 10
allocation = "{allocation}"

[regions]
names = ["a"]

[metrics.m]
kind = "scalar_mean"
epsilon = "1"
clip = {{ low = "0", high = "1", source = "t" }}

[metrics.h]
kind = "scalar_mean"
epsilon = "1"
clip = {{ low = "0", high = "1", source = "t" }}
"""


def test_an_overcommitted_per_metric_policy_loads_with_the_warning_plan_gives() -> None:
    with pytest.warns(PolicyWarning, match="over-committed by 1.9 ε per round") as seen:
        p = Policy.from_toml(OVERCOMMITTED.format(allocation="per_metric"))
    note = p.overcommitment_note()
    assert note is not None
    assert "allocations add up to more than ε_eval" in note
    assert note in str(seen[0].message)
    assert note in dl_plan(p, {"a": 100}).warnings


def test_a_pooled_policy_of_absolute_budgets_shares_them_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PolicyWarning)
        Policy.from_toml(OVERCOMMITTED.format(allocation="pooled"))
