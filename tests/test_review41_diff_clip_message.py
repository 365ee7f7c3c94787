"""Review 41 diff: the one-double clip refusal (2513180) shows each bound "as it was
written" through a 60-digit decimal in fixed notation: ``low = "1e-300"`` came back as
``0.000…0001`` with 300 zeros (a 776-character message), and ``low = "1/3"`` (the exact
``p/q`` form a policy may carry) as sixty 3s, neither of them what was written."""

from __future__ import annotations

import pytest

import dpledger as dl

POLICY = """
name = "r41-clip"
version = "1"
neighbouring = "replace"
epoch_epsilon = "4"
[regions]
open = true
[metrics.m]
kind = "scalar_mean"
epsilon = "0.5"
clip = {{ low = "{low}", high = "{high}", source = "s" }}
"""


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
def test_the_refusal_shows_the_bounds_as_written(low: str, high: str, low_shown: str) -> None:
    with pytest.raises(dl.PolicyError, match="same double") as e:
        dl.Policy.from_toml(POLICY.format(low=low, high=high))
    assert f"clip low ({low_shown}) and high ({high})" in str(e.value)
    assert len(str(e.value)) < 300
