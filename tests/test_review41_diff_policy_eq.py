"""Review 41 diff: Policy equality through the content hash raised on an unvalidated policy.

09aa939 made ``Policy.__eq__`` compare content hashes ("same equality as before"). A
policy built by ``model_construct`` (which the ledger refuses on open, as a PolicyError)
may lack a field or hold a float where the hash serialises a Fraction: comparing it with
a loaded policy raised ``KeyError`` or pydantic's ``PydanticSerializationError`` out of
``==`` (and so out of ``in`` on a list), where pydantic's own comparison said False.
"""

from __future__ import annotations

import warnings

import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger.policy import Policy


def _loaded() -> Policy:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Policy.load(SPATIAL)


def _fields(p: Policy) -> dict[str, object]:
    return {k: getattr(p, k) for k in Policy.model_fields}


@pytest.mark.parametrize("change", ["no metrics", "float budget"])
def test_an_unvalidated_policy_compares_unequal_without_raising(change: str) -> None:
    p = _loaded()
    fields = _fields(p)
    if change == "no metrics":
        del fields["metrics"]
    else:
        fields["epoch_epsilon"] = 1.0  # a float where a Fraction is kept
    q = Policy.model_construct(**fields)  # type: ignore[arg-type]
    assert not q == p  # noqa: SIM201 (== itself is under test)
    assert not p == q  # noqa: SIM201
    assert q != p
    assert q not in [p]
    assert q == q  # the same object


def test_equal_content_and_source_still_compare_equal() -> None:
    a, b = _loaded(), _loaded()
    assert a == b
    assert a is not b
    assert a != Policy.model_validate({**_fields(a), "source": "other.toml"})
    assert isinstance(a, dl.Policy)
