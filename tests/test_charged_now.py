"""What a call charged (review P1): a retry returns the recorded release, whose ``charge``
is the original one; ``retried`` and ``charged_now`` (and a round's ``charged``) say what
this call spent, which is exactly how much the ledger's spend grew. Both stores."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from _stores import CONTRACT_POLICY, StoreUnderTest

from dpledger import Policy, Release, ReleaseRequest
from dpledger.cli.main import main
from dpledger.ledger import Ledger

N = 100


def req(rid: str, region: str = "a") -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric="loss", region=region, cohort=N, release_id=rid)


def spend(ledger: Ledger) -> Fraction:
    """Every client's loss in epoch 0, summed over the regions (the public views)."""
    return ledger.spent(0, "a").amount + ledger.spent(0, "b").amount


def test_a_retried_release_says_it_charged_nothing(store: StoreUnderTest) -> None:
    ledger = store.open()
    first = ledger.release(req("one"), 30.0)
    assert (first.retried, first.charged_now.amount) == (False, Fraction(1, 10))
    before = spend(ledger)
    again = ledger.release(req("one"), 30.0)
    assert again.entry_id == first.entry_id
    assert again.charge == first.charge  # the entry's charge, made when it was recorded
    assert (again.retried, again.charged_now.amount) == (True, 0)
    assert spend(ledger) - before == again.charged_now.amount == 0
    assert again.as_dict()["retried"] is True
    assert again.as_dict()["charged_now"] == "0"


def test_a_round_with_retries_reports_what_it_charged(store: StoreUnderTest) -> None:
    ledger = store.open()
    ledger.release_round([(req("r1"), 30.0), (req("r2", "b"), 30.0)])
    before = spend(ledger)
    items = [(req("r1"), 30.0), (req("r2", "b"), 30.0), (req("r3"), 30.0)]
    result = ledger.release_round(items)
    assert [r.retried for r in result.releases] == [True, True, False]
    assert result.charged.amount == spend(ledger) - before == Fraction(1, 10)
    assert result.charged.unit == "epsilon"


def test_a_repeat_inside_a_round_is_charged_once(store: StoreUnderTest) -> None:
    ledger = store.open()
    ledger.release(req("old"), 30.0)
    before = spend(ledger)
    items = [(req("x"), 30.0), (req("x"), 30.0), (req("old"), 30.0), (req("x"), 30.0),
             (req("y", "b"), 30.0), (req("old"), 30.0)]  # fmt: skip
    result = ledger.release_round(items, partial=True)
    assert all(isinstance(o, Release) for o in result.outcomes)
    assert result.charged.amount == spend(ledger) - before == Fraction(2, 10)
    assert ledger.release_round([]).charged.amount == 0


def test_the_cli_says_a_re_run_release_charged_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.toml").write_text(CONTRACT_POLICY)
    (tmp_path / "agg.json").write_text("30.0")
    argv = ["release", "--policy", str(tmp_path / "p.toml"), "--ledger", str(tmp_path / "l.db"),
            "--epoch", "0", "--metric", "loss", "--region", "a", "--cohort", str(N),
            "--aggregate", str(tmp_path / "agg.json"), "--release-id", "cli-1"]  # fmt: skip
    assert main(argv) == 0
    assert "charged   epsilon = 1/10" in capsys.readouterr().out
    policy = Policy.load(tmp_path / "p.toml")
    with Ledger.open(tmp_path / "l.db", policy, mode="read") as ledger:
        before = spend(ledger)
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "recorded earlier as entry 1" in out
    assert "charged now: 0" in out
    assert "charged   epsilon" not in out
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["retried"], data["charged_now"], data["charge"]) == (True, "0", "1/10")
    with Ledger.open(tmp_path / "l.db", policy, mode="read") as ledger:
        assert spend(ledger) == before == Fraction(1, 10)
