"""The write path's chain hash is the definition's, byte for byte, on every kind of entry.

:func:`hashed_output` (what a flush computes) formats the canonical text itself;
:func:`chain_hash` (what ``verify`` recomputes) runs the JSON encoder. They must agree on
every field a draft can carry: non-ASCII and escaped text, absent optional fields,
signed zeros, subnormal and extreme floats, and they must refuse the same outputs.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.ledger.records import EntryDraft, chain_hash, hashed_output, hashed_outputs
from dpledger.mechanisms import MechanismFacts
from dpledger.types import Budget

TEXT = st.text(min_size=1, max_size=20)  # any code point: escapes and \\u sequences
MAYBE = st.none() | TEXT
FINITE = st.floats(allow_nan=False, allow_infinity=False)


def draft(**kw: object) -> EntryDraft:
    base: dict[str, object] = {
        "epoch": 3,
        "region": "eu-west",
        "metric": "loss",
        "policy_name": "p",
        "policy_version": "1",
        "policy_hash": "a" * 64,
        "edges_version": None,
        "facts": MechanismFacts("laplace", "epsilon", 3.4, 17.0, 0),
        "charge": Budget(Fraction(1, 5), "epsilon"),
        "cohort": 2400,
        "output": (1.5,),
    }
    return EntryDraft(**{**base, **kw})  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    seq=st.integers(1, 2**63 - 1),
    epoch=st.integers(0, 2**63 - 1),
    cohort=st.integers(1, 10**9),
    region=TEXT,
    metric=TEXT,
    edges=MAYBE,
    release_id=MAYBE,
    request_hash=MAYBE,
    principal=MAYBE,
    created=TEXT,
    prev=TEXT,
    output=st.lists(FINITE, max_size=12),
    charge=st.fractions(min_value=0, max_value=100),
)
def test_the_written_out_hash_equals_the_definition(
    seq: int,
    epoch: int,
    cohort: int,
    region: str,
    metric: str,
    edges: str | None,
    release_id: str | None,
    request_hash: str | None,
    principal: str | None,
    created: str,
    prev: str,
    output: list[float],
    charge: Fraction,
) -> None:
    d = draft(
        epoch=epoch, region=region, metric=metric, edges_version=edges, cohort=cohort,
        output=tuple(output), release_id=release_id, request_hash=request_hash,
        principal=principal, charge=Budget(charge, "epsilon"),
    )  # fmt: skip
    text, digest = hashed_output(seq, created, d, prev)
    assert digest == chain_hash(seq, created, d, prev)
    assert json.loads(text) == output  # the stored output reads back exactly


def test_signed_zero_subnormal_and_extreme_floats_hash_alike() -> None:
    values = (-0.0, 0.0, 5e-324, -1.7976931348623157e308, 1e16, 1 / 3, 123456789.0)
    d = draft(output=values, edges_version="e/v1", principal='ünï\n"team"')
    assert hashed_output(9, "now", d, "b" * 64)[1] == chain_hash(9, "now", d, "b" * 64)
    record = draft(facts=MechanismFacts("laplace", "epsilon", 2.0, 4.0, 0, privacy_unit="record",
                                        records=3))  # fmt: skip
    assert hashed_output(1, "t", record, "c")[1] == chain_hash(1, "t", record, "c")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_output_is_refused_by_both(bad: float) -> None:
    d = draft(output=(1.0, bad))
    with pytest.raises(ValueError, match="Out of range float"):
        chain_hash(1, "t", d, "p")
    with pytest.raises(ValueError, match="Out of range float"):
        hashed_output(1, "t", d, "p")


def test_other_number_types_take_the_definition() -> None:
    class Seq(int):
        pass

    for d, seq in ((draft(output=(np.float64(2.5), 1.0)), 1), (draft(output=(3, 1.0)), 1),
                   (draft(), Seq(4))):  # fmt: skip
        text, digest = hashed_output(seq, "t", d, "p")
        assert digest == chain_hash(seq, "t", d, "p")
        assert json.loads(text) == list(d.output)


def test_a_text_field_that_is_not_text_is_refused_not_hashed_otherwise() -> None:
    with pytest.raises(TypeError):
        hashed_output(1, "t", draft(region=7), "p")  # the definition would write 7


@settings(max_examples=100, deadline=None)
@given(
    picks=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 3)),
                   min_size=1, max_size=8),
    seq=st.integers(1, 2**62),
    outputs=st.lists(st.lists(FINITE, max_size=4), min_size=8, max_size=8),
)  # fmt: skip
def test_a_batch_hashes_as_one_call_per_entry_chained(
    picks: list[tuple[int, int, int]], seq: int, outputs: list[list[float]]
) -> None:
    """A flush's batch (:func:`hashed_outputs`), whose drafts share their policy, facts and
    charge objects or not, gives each entry the texts and hash of :func:`hashed_output`
    chained one by one, and so :func:`chain_hash`'s; an entry of other number types takes
    the definition inside the batch too."""
    facts = [
        MechanismFacts("laplace", "epsilon", 3.4, 17.0, 0),
        MechanismFacts("laplace", "epsilon", 2.0, 4.0, 0, privacy_unit="record", records=3),
        MechanismFacts("laplace", "epsilon", 3.4, 17.0, 0),
    ]  # equal to the first, not it
    charges = [
        Budget(Fraction(1, 5), "epsilon"),
        Budget(Fraction(3), "epsilon"),
        Budget(Fraction(1, 5), "epsilon"),
    ]
    names = [("p", "1", "a" * 64, None), ("q", "2", "b" * 64, "e/v1"), ("p", "1", "a" * 64, "ü")]
    drafts = []
    for k, (f, c, n) in enumerate(picks):
        name, version, digest, edges = names[n % 3]
        out = tuple(outputs[k]) if n < 3 else (3, 1.5)  # an int: the definition's path
        rid = None if k % 2 else f"id{k}"
        drafts.append(draft(facts=facts[f], charge=charges[c], policy_name=name,
                            policy_version=version, policy_hash=digest, edges_version=edges,
                            output=out, region=f"r{k}", release_id=rid))  # fmt: skip
    batch = hashed_outputs(seq, "2026-01-01T00:00:00+00:00", drafts, "c" * 64)
    prev = "c" * 64
    for i, (d, (mechanism, charge, text, digest)) in enumerate(zip(drafts, batch, strict=True)):
        assert (text, digest) == hashed_output(seq + i, "2026-01-01T00:00:00+00:00", d, prev)
        assert digest == chain_hash(seq + i, "2026-01-01T00:00:00+00:00", d, prev)
        assert (mechanism, charge) == (d.facts.as_json(), d.charge.text)
        prev = digest
