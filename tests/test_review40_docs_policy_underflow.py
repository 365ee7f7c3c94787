"""Review 40 (docs): docs/policy.md says a float written below the doubles' range
(``1e-400``) "reads as 0 and is refused saying so". Only budgets and eval_fraction were:
a clip bound, a y_clip bound or an edge of ``1e-400`` loaded silently as 0 (a bound the
author did not write), and ``delta``/``target`` were refused as "greater than 0 (got 0.0)"
without saying why. Now every such float literal is refused, naming its field."""

from __future__ import annotations

import pytest

from dpledger import Policy, PolicyError

BASE = """name = "p"
version = "1"
neighbouring = "replace"
epoch_epsilon = "4.0"
{top}
[regions]
names = ["a"]
[metrics.m]
kind = "scalar_mean"
epsilon = "0.1"
clip = {{ low = {low}, high = "1", source = "s" }}
[metrics.h]
kind = "histogram"
epsilon = "0.1"
cap_per_client = "1"
edges_version = "v1"
edges = [{edge}, 1.0]
"""


def _text(top: str = "", low: str = '"0"', edge: str = "0.5") -> str:
    return BASE.format(top=top, low=low, edge=edge)


@pytest.mark.parametrize(
    ("fields", "where", "literal"),
    [
        ({"low": "1e-400"}, "metrics.m.clip.low", "1e-400"),
        ({"low": "-1e-400"}, "metrics.m.clip.low", "-1e-400"),
        ({"edge": "1e-400"}, "metrics.h.edges.0", "1e-400"),
        ({"top": "delta = 1e-400"}, "delta", "1e-400"),
        ({"top": "eval_fraction = 2.5e-999"}, "eval_fraction", "2.5e-999"),
    ],
)
def test_an_underflowed_float_is_refused_naming_its_field(
    fields: dict[str, str], where: str, literal: str
) -> None:
    with pytest.raises(PolicyError, match=r"underflowed to 0\.0") as e:
        Policy.from_toml(_text(**fields))
    assert e.value.field == where
    assert literal in str(e.value)


@pytest.mark.parametrize("zero", ["0.0", "-0.0", "0e-400", "0.000"])
def test_a_written_zero_still_loads(zero: str) -> None:
    policy = Policy.from_toml(_text(low=zero, edge=zero))
    assert policy.metrics["m"].clip is not None
    assert policy.metrics["m"].clip.low == 0
    assert policy.metrics["h"].edges == (0.0, 1.0)


def test_a_top_level_source_field_is_refused_not_dropped() -> None:
    """docs/policy.md: a field its table does not list is refused. A top-level ``source``
    (the name the model keeps the file's path under) was silently overwritten instead."""
    with pytest.raises(PolicyError, match="no top-level source field") as e:
        Policy.from_toml('source = "held-out fleet"\n' + _text())
    assert e.value.field == "source"


@pytest.mark.parametrize("value", ['"yes"', '"true"', "1", "0.0", '"false"'])
@pytest.mark.parametrize("field", ["nonnegative", "open"])
def test_a_boolean_field_takes_a_toml_boolean_only(field: str, value: str) -> None:
    """``nonnegative`` (the L2 sensitivity under replace: √2·cap or 2·cap) and ``[regions]
    open`` were coerced by pydantic's lax mode: ``"yes"`` or ``1`` read as true, ``0.0``
    as false, where policy.md holds every other field to its TOML type."""
    text = _text()
    if field == "open":
        text = text.replace('names = ["a"]', f"open = {value}")
    else:
        text += f"nonnegative = {value}\n"  # the histogram's table is the last one
    with pytest.raises(PolicyError, match=field):
        Policy.from_toml(text)
