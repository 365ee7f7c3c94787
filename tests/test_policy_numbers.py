"""A policy's numbers: plain ASCII decimals, finite normal doubles in a documented range.

Budgets, clip bounds and caps written as strings were parsed with no range check (a
budget of "1e309" loaded and released the raw mean; "1e100000" broke serialisation), and
Python's Fraction grammar let in underscores, non-ASCII digits and whitespace.
"""

from __future__ import annotations

import tempfile
import warnings
from fractions import Fraction
from pathlib import Path

import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger import Policy, PolicyError
from dpledger.policy import to_fraction

SHIPPED = SPATIAL.read_text()


def _variant(old: str, new: str) -> str:
    assert old in SHIPPED, old
    return SHIPPED.replace(old, new, 1)


EPS = 'epoch_epsilon = "4.0"'
HIGH = 'high = "3.4"'
CAP = 'cap_per_client = "40"'


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (EPS, 'epoch_epsilon = "1e309"', "at most 1e9"),
        (EPS, 'epoch_epsilon = "4e9"', "at most 1e9"),
        (EPS, "epoch_epsilon = 10000000000", "at most 1e9"),
        (EPS, 'epoch_epsilon = "1e100000"', "out of range"),
        (EPS, 'epoch_epsilon = "1e-320"', "smallest normal double"),
        (EPS, 'epoch_epsilon = "1e-100000"', "out of range"),
        ('weight = "1" ', 'weight = "1e10" ', "at most 1e9"),
        ('eval_fraction = "0.25"', 'eval_fraction = "1e-320"', "smallest normal double"),
        (HIGH, 'high = "1e309"', "at most 1e12"),
        (HIGH, 'high = "1e-320"', "smallest normal double"),
        (HIGH, "high = 1e13", "at most 1e12"),
        (CAP, 'cap_per_client = "1e309"', "at most 1e12"),
        (CAP, 'cap_per_client = "1e-320"', "smallest normal double"),
    ],
)
def test_numbers_out_of_the_documented_range_are_refused_at_load(
    old: str, new: str, message: str
) -> None:
    with pytest.raises(PolicyError, match=message):
        Policy.from_toml(_variant(old, new))


@pytest.mark.parametrize("text", ["4_0", "٤٠", " 40", "40 ", "+40", "4e", ".5", "5.", "0x28", ""])
def test_only_a_plain_ascii_decimal_is_read_as_a_number(text: str) -> None:
    with pytest.raises(PolicyError, match="plain decimal"):
        Policy.from_toml(_variant(CAP, f'cap_per_client = "{text}"'))


@pytest.mark.parametrize(
    ("text", "value"), [("40", 40), ("4.0e1", 40), ("4E+1", 40), ("400e-1", 40), ("80/2", 40)]
)
def test_plain_decimals_and_the_exact_p_over_q_form_load(text: str, value: int) -> None:
    p = Policy.from_toml(_variant(CAP, f'cap_per_client = "{text}"'))
    assert p.metrics["error_histogram"].cap_per_client == Fraction(value)


def test_the_policys_own_json_form_round_trips() -> None:
    p = Policy.load(SPATIAL)
    again = Policy.model_validate(p.model_dump(mode="json"))
    assert again.content_hash == p.content_hash


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("rounds_per_epoch = 1", "rounds_per_epoch = true"),
        ("rounds_per_epoch = 1", 'rounds_per_epoch = "10"'),
        ("rounds_per_epoch = 1", "rounds_per_epoch = 10.0"),
        ("dimension = 10", "dimension = true"),
        ("dimension = 10", 'dimension = "10"'),
    ],
)
def test_integer_fields_refuse_booleans_strings_and_floats(old: str, new: str) -> None:
    with pytest.raises(PolicyError, match="valid integer"):
        Policy.from_toml(_variant(old, new))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("target = 0.1 ", "target = true "),
        ("target = 0.1 ", 'target = "0.1" '),
        ("[0.5, 1.0,", "[true, 1.0,"),
        ("[0.5, 1.0,", '["0.5", 1.0,'),
        ('epoch_epsilon = "4.0"', 'epoch_epsilon = "4.0"\ndelta = true'),
        ('epoch_epsilon = "4.0"', 'epoch_epsilon = "4.0"\ndelta = "1e-6"'),
    ],
)
def test_float_fields_refuse_booleans_and_strings(old: str, new: str) -> None:
    with pytest.raises(PolicyError, match="valid number"):
        Policy.from_toml(_variant(old, new))


def test_a_subnormal_delta_is_refused() -> None:
    with pytest.raises(PolicyError, match=r"delta .* smallest normal double"):
        Policy.from_toml(_variant(EPS, f"{EPS}\ndelta = 1e-320"))
    assert Policy.from_toml(_variant(EPS, f"{EPS}\ndelta = 1e-300")).delta == 1e-300


def test_the_largest_budgets_keep_every_downstream_figure_finite() -> None:
    text = _variant(EPS, 'epoch_epsilon = "1e9"').replace(
        'eval_fraction = "0.25"', 'eval_fraction = "1"'
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        p = Policy.from_toml(text)
    with tempfile.TemporaryDirectory() as d:
        ledger = dl.Ledger.open(str(Path(d) / "l.db"), p, mode="create")
        req = dl.ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="na", cohort=100)
        ledger.release(req, 50.0)
        life = ledger.lifetime("na")  # its zCDP view is ρ = 2e16: past OpenDP's conversion
        assert life.epsilon_zcdp > 2e16
        assert dl.plan(p, cohorts={"na": 100}).regions


def test_a_long_exact_fraction_still_reads_but_a_long_decimal_does_not() -> None:
    long = "1" * 500
    assert to_fraction(f"{long}/3") == Fraction(int(long), 3)  # a ledger's exact budget text
    with pytest.raises(ValueError, match="plain decimal"):
        to_fraction(long)
