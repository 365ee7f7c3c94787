"""Review 39 (api): ``PolicyError`` carries ``source``, ``field`` and ``problem``, "names
the file, the field and the problem" — but no code path ever set ``field``: a policy
with a bad ``epoch_epsilon`` raised a PolicyError whose ``field`` was "" (the field was
only inside the message text). Now ``field`` is the dotted path of the first problem,
and the message is unchanged."""

from __future__ import annotations

import pickle
from fractions import Fraction

import pytest

import dpledger as dl
from tests.factories import SPATIAL

TEXT = SPATIAL.read_text()


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('epoch_epsilon = "4.0"', 'epoch_epsilon = "-4"', "epoch_epsilon"),
        ('high = "3.4"', 'high = "-3.4"', "metrics.clipped_mean_loss.clip"),
        ("rounds_per_epoch = 1", "rounds_per_epoch = 1\nbogus = 2", "bogus"),
        ('name = "spatial-eval"', "", "name"),
    ],
)
def test_a_policy_error_names_its_field(old: str, new: str, field: str) -> None:
    assert old in TEXT
    with pytest.raises(dl.PolicyError) as caught:
        dl.Policy.from_toml(TEXT.replace(old, new), source="x.toml")
    e = caught.value
    assert e.field == field
    assert e.source == "x.toml"
    assert str(e) == f"x.toml: {e.problem}"
    assert e.problem.startswith(f"{field}: ")
    back = pickle.loads(pickle.dumps(e))
    assert (back.field, str(back)) == (e.field, str(e))


def test_a_copy_names_its_field_too() -> None:
    policy = dl.Policy.load(SPATIAL)
    with pytest.raises(dl.PolicyError) as caught:
        policy.model_copy(update={"eval_fraction": Fraction(3)})
    assert caught.value.field == "eval_fraction"


def test_a_message_without_the_field_still_gets_it_prefixed() -> None:
    e = dl.PolicyError("must be > 0", source="p.toml", field="epoch_epsilon")
    assert str(e) == "p.toml: epoch_epsilon: must be > 0"
