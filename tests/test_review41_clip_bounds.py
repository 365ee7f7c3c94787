"""Review 41: clip bounds that are one double, and the refusals that quote clip bounds.

- (priv) A clip whose decimal bounds differ but round to the same double (``low = "1"``,
  ``high = "1.00000000000000001"``) loaded, then every release, dry run and plan failed
  with ``InvalidInput: need low < high, got [1, 1]`` (the sensitivity is taken over the
  doubles clients clip to), under either relation: refused when the policy loads.
- (diff) That refusal printed each bound through a 60-digit fixed decimal: ``1e-300`` as
  ``0.000…0001`` with 300 zeros (a 776-character message), ``1/3`` as sixty 3s. Shown as
  written now.
- (diff 2) Its neighbour, "clip low must be below high", printed pydantic's Fraction
  (``100000000000000001/100000000000000000``; ``1/`` and 301 digits for ``1e-300``); and a
  ``p/q`` bound whose decimal runs past 4,300 digits ended in Python's own
  ``set_int_max_str_digits`` advice. Both show the bounds as written.
"""

from __future__ import annotations

import pytest

import dpledger as dl
from dpledger import mechanisms as mech

POLICY = """
name = "r41-clip"
version = "1"
neighbouring = "{relation}"
epoch_epsilon = "4"
[regions]
open = true
[metrics.m]
kind = "scalar_mean"
epsilon = "0.5"
clip = {{ low = "{low}", high = "{high}", source = "s" }}
"""


def _load(low: str, high: str, relation: str = "replace") -> dl.Policy:
    return dl.Policy.from_toml(POLICY.format(relation=relation, low=low, high=high))


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_a_clip_of_one_double_is_refused_at_load(relation: str) -> None:
    with pytest.raises(dl.PolicyError, match="same double"):
        _load("1", "1.00000000000000001", relation)


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_a_clip_one_ulp_wide_still_loads_and_calibrates(relation: str) -> None:
    facts, _ = mech.mechanism_facts(_load("1", "1.0000000000000003", relation), "m")
    assert facts.sensitivity > 0


@pytest.mark.parametrize(
    ("low", "high", "low_shown"),
    [
        ("1e-300", "1.00000000000000001e-300", "1e-300"),
        ("1/3", "0.33333333333333334", "1/3"),
        ("1", "1.00000000000000001", "1"),
        ("-1e12", "-999999999999.99999", "-1000000000000"),
        ("1", "1.000000000000000000000000000000000000001", "1"),  # past decimal's 28 digits
    ],
)
def test_the_one_double_refusal_shows_the_bounds_as_written(
    low: str, high: str, low_shown: str
) -> None:
    with pytest.raises(dl.PolicyError, match="same double") as e:
        _load(low, high)
    assert f"clip low ({low_shown}) and high ({high})" in str(e.value)
    assert len(str(e.value)) < 300


@pytest.mark.parametrize(
    ("low", "high", "shown"),
    [
        ("1.00000000000000001", "1", "clip low (1.00000000000000001) must be below high (1)"),
        ("0.1", "0.1", "clip low (0.1) must be below high (0.1)"),
        ("2e-300", "1e-300", "clip low (2e-300) must be below high (1e-300)"),
        ("2/3", "1/3", "clip low (2/3) must be below high (1/3)"),
    ],
)
def test_the_order_refusal_shows_the_bounds_as_written(low: str, high: str, shown: str) -> None:
    with pytest.raises(dl.PolicyError, match="must be below") as e:
        _load(low, high)
    assert shown in str(e.value)


def test_a_bound_whose_decimal_is_too_long_is_shown_as_written() -> None:
    low, high = f"{2**12978 + 1}/{2**14000}", f"{2**12978 + 3}/{2**14000}"  # 2^-1022 and up
    with pytest.raises(dl.PolicyError, match="same double") as e:
        _load(low, high)
    assert "set_int_max_str_digits" not in str(e.value)
    assert f"clip low ({low})" in str(e.value)
