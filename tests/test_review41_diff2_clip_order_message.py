"""Review 41 diff 2: the clip refusals show each bound as it was written.

90cc643 made the one-double clip refusal show each bound as written (``1e-300``, ``1/3``)
instead of a 300-zero decimal. Its neighbour, "clip low must be below high", one line
above, still printed pydantic's Fraction: ``low = "1.00000000000000001"`` came back as
``100000000000000001/100000000000000000``, ``0.1`` as ``1/10``, ``1e-300`` as ``1/`` and
301 digits. And ``_exact`` itself ended in Python's own "Exceeds the limit (4300 digits)
for integer string conversion; use sys.set_int_max_str_digits()" for a bound written as
``p/q`` whose decimal runs past 4,300 digits (a denominator of 2^14000): advice about the
interpreter, not the policy.
"""

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
        dl.Policy.from_toml(POLICY.format(low=low, high=high))
    assert shown in str(e.value)


def test_a_bound_whose_decimal_is_too_long_is_shown_as_written() -> None:
    low, high = f"{2**12978 + 1}/{2**14000}", f"{2**12978 + 3}/{2**14000}"  # 2^-1022 and up
    with pytest.raises(dl.PolicyError, match="same double") as e:
        dl.Policy.from_toml(POLICY.format(low=low, high=high))
    assert "set_int_max_str_digits" not in str(e.value)
    assert f"clip low ({low})" in str(e.value)
