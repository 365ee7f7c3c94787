"""Review 41 (priv): a clip whose decimal bounds differ but round to the same double
(``low = "1"``, ``high = "1.00000000000000001"``) loaded, and then every release, dry run
and plan of the policy failed with ``InvalidInput: need low < high, got [1, 1]`` — a
message contradicting the policy the user wrote — because the sensitivity is taken over
the doubles clients clip to (``_sensitivity.sensitivity``), under either relation. Such a
clip (every client sends one value) is now refused when the policy loads, naming it.
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
clip = {{ low = "1", high = "{high}", source = "s" }}
"""


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_a_clip_of_one_double_is_refused_at_load(relation: str) -> None:
    with pytest.raises(dl.PolicyError, match="same double"):
        dl.Policy.from_toml(POLICY.format(relation=relation, high="1.00000000000000001"))


@pytest.mark.parametrize("relation", ["replace", "add_remove"])
def test_a_clip_one_ulp_wide_still_loads_and_calibrates(relation: str) -> None:
    p = dl.Policy.from_toml(POLICY.format(relation=relation, high="1.0000000000000003"))
    facts, _ = mech.mechanism_facts(p, "m")
    assert facts.sensitivity > 0
