"""Names match their rule in whole: ``re.match`` let ``$`` pass a final newline.

An audit spent a second budget from region "a\\n" after "a" was exhausted (an open
partition admitted it), and a policy named "n\\n" or a metric "m\\n" loaded. A policy a
ledger recorded under the former rule still reads back as it was accepted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import dpledger as dl
from dpledger.errors import InvalidInput, ReleaseRefused
from dpledger.policy.base import RECORDED
from dpledger.policy.loading import parse_toml
from dpledger.policy.regions import Regions

OPEN = """name = "{name}"
version = "{version}"
neighbouring = "replace"
epoch_epsilon = "4"
eval_fraction = "0.25"
[regions]
open = true
[metrics.{metric}]
kind = "scalar_mean"
weight = "1"
clip = {{ low = "0", high = "1", source = "t" }}
"""


def text(name: str = "o", version: str = "1", metric: str = '"m"') -> str:
    return OPEN.format(name=name, version=version, metric=metric)


@pytest.mark.parametrize(
    "fields",
    [{"name": "n\\n"}, {"version": "1\\n"}, {"metric": '"m\\n"'}, {"name": "n\\r"}],
    ids=["name", "version", "metric", "carriage-return"],
)
def test_a_name_with_a_final_newline_is_refused(fields: dict[str, str]) -> None:
    with pytest.raises(dl.PolicyError, match="must match"):
        dl.Policy.from_toml(text(**fields), source="t.toml")


@pytest.mark.parametrize("region", ["a\n", "a\r\n", "a\n\n", "\na"])
def test_a_region_name_with_a_newline_is_refused(region: str) -> None:
    with pytest.raises(InvalidInput, match="must match"):
        Regions(names=(region,))
    assert not Regions(open=True).admits(region)


def test_an_open_partition_spends_no_second_budget_for_a_spelling(tmp_path: Path) -> None:
    policy = dl.Policy.from_toml(text(), source="t.toml")
    request = dl.ReleaseRequest(epoch=0, metric="m", region="a", cohort=100)
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        ledger.release(request, 50.0)  # weight 1: the region's whole ε_eval
        with pytest.raises(dl.BudgetExceeded):
            ledger.release(request, 50.0)
        before = (tmp_path / "l.db").read_bytes()
        for spelling in ("a\n", "a\r\n"):
            with pytest.raises(ReleaseRefused):
                ledger.release(request.model_copy(update={"region": spelling}), 50.0)
        assert (tmp_path / "l.db").read_bytes() == before
        assert list(ledger.spent_by_region(0)) == ["a"]


def test_a_recorded_policy_reads_back_as_it_was_accepted() -> None:
    token = RECORDED.set(True)
    try:
        assert Regions(names=("a\n",)).names == ("a\n",)
    finally:
        RECORDED.reset(token)
    data = parse_toml(text(name="n\\n"), source="t.toml")
    assert dl.Policy.from_mapping(data, recorded=True).name == "n\n"
    with pytest.raises(dl.PolicyError, match="must match"):
        dl.Policy.from_mapping(data)
