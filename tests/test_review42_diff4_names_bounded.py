"""Review 42 diff 4: the typo refusal c438317 added to ``Ledger.entries`` (and the one of
``spent``/``lifetime``, widened to every recorded version by 87b643e) listed every region
name: a policy of 10^4 declared regions made an 89 KB message (a 422 body over the API),
and the name asked for was quoted unbounded. The list is cut, saying how many more."""

from __future__ import annotations

from pathlib import Path

import pytest

import dpledger as dl

NAMES = ", ".join(f'"r{i}"' for i in range(10_000))
TEXT = f"""
name = "big"
version = "1"
neighbouring = "replace"
epoch_epsilon = "400"
eval_fraction = "0.25"
allocation = "pooled"
[regions]
names = [{NAMES}]
[metrics.loss]
kind = "scalar_mean"
epsilon = "0.1"
clip = {{ low = "0", high = "1", source = "t" }}
"""


def test_unknown_region_messages_are_bounded(tmp_path: Path) -> None:
    policy = dl.Policy.from_toml(TEXT, source="big.toml")
    target = str(tmp_path / "l.db")
    with dl.Ledger.open(target, policy, mode="create") as ledger:
        request = dl.ReleaseRequest(epoch=0, metric="loss", region="r1", cohort=100)
        ledger.release_round([(request, 50.0)])
    with dl.Ledger.open(target, policy, mode="read") as ledger:
        for ask in (
            lambda: ledger.entries(region="nope" * 10_000),
            lambda: ledger.entries(metric="nope" * 10_000),
            lambda: ledger.lifetime("nope" * 10_000),
            lambda: ledger.spent(0, "nope" * 10_000),
        ):
            with pytest.raises(dl.InvalidInput, match="unknown") as e:
                ask()
            assert len(str(e.value)) < 1_000
        with pytest.raises(dl.InvalidInput, match="9980 more"):
            ledger.entries(region="nope")
