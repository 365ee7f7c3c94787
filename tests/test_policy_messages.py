"""Policy number messages say what the number is and what to do (audit 5, F8).

A p/q part beyond Python's integer-parsing limit leaked Python's own advice ("use
sys.set_int_max_str_digits()"); a tiny p/q clip was refused as "(this is 0)".
"""

from __future__ import annotations

import pytest
from factories import SPATIAL

from dpledger import Policy, PolicyError

SHIPPED = SPATIAL.read_text()


def _variant(old: str, new: str) -> Policy:
    assert old in SHIPPED, old
    return Policy.from_toml(SHIPPED.replace(old, new, 1))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('eval_fraction = "0.25"', 'eval_fraction = "1/' + "9" * 5000 + '"'),
        ('cap_per_client = "40"', 'cap_per_client = "-' + "3" * 4400 + '/7"'),
    ],
)
def test_a_p_over_q_part_past_pythons_limit_is_refused_in_our_words(old: str, new: str) -> None:
    with pytest.raises(PolicyError, match=r"has [45],[0-9]{3} digits, more than the 4,300") as e:
        _variant(old, new)
    assert "set_int_max_str_digits" not in str(e.value)
    assert "write a decimal" in str(e.value)


@pytest.mark.parametrize(
    ("new", "shown"),
    [
        ('high = "34/' + "1" * 4000 + '"', "about 3.1e-3998, which a double reads as 0"),
        ('high = "1/' + "9" * 400 + '"', "about 1e-400, which a double reads as 0"),
        ('high = "1e-320"', "this is 1e-320"),  # a subnormal: shown as the double
    ],
)
def test_a_tiny_clip_is_shown_as_what_it_is_not_as_zero(new: str, shown: str) -> None:
    with pytest.raises(PolicyError, match=r"smallest normal double 2\.2250738585072014e-308") as e:
        _variant('high = "3.4"', new)
    assert shown in str(e.value)
    assert "(this is 0)" not in str(e.value)
