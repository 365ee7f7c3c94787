"""Review 42 diff 3: ``contribution_reply``'s messages about an ``extra`` mapping's names.

79c09e7 refused an ``extra`` that is no mapping, typed. One step over, inside a mapping:
a name that is no text (``{5: record}``) was refused as one "starting 'dpledger.'" (the
wrapper's namespace), which it is not; and a record of the wrong type was named with an
unbounded ``repr``, so a 100,000-character name made a 100,077-character message where
every other bad value goes through the bounded ``shown``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

import test_review42_flw_extra_records as flw
from flwr.app import Message, MetricRecord

from dpledger.errors import InvalidInput
from dpledger.flower import contribution_reply

DATA, REG, instruction = flw.DATA, flw.REG, flw.instruction


@pytest.mark.parametrize("name", [5, None, ("dpledger.scalars",)])
def test_a_name_that_is_no_text_is_refused_as_such(instruction: Message, name: object) -> None:
    with pytest.raises(InvalidInput, match="extra record names are text") as e:
        contribution_reply(instruction, DATA, data_for=REG, extra={name: MetricRecord({})})
    assert "wrapper's" not in str(e.value)


def test_a_long_name_is_bounded_in_the_message(instruction: Message) -> None:
    with pytest.raises(InvalidInput, match="must be an ArrayRecord") as e:
        contribution_reply(instruction, DATA, data_for=REG, extra={"x" * 100_000: 1})
    assert len(str(e.value)) < 300
