"""Budget views read the budget of the policy an epoch is bound to (audit 2, finding 3).

An epoch is bound to the policy of its first release; a release in it under another
version is refused. The views used the opening policy's budget instead: opened with a
v2 whose ε_eval is 10×, epoch 0 (bound to v1, 1/5 spent of 1) showed 49/5 left in
``remaining``, ``ledger show`` and the service, and ``plan --ledger --epoch 0`` said
"fits" for an epoch that refuses every release under v2.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger.cli.main import main

V1 = SPATIAL.read_text()
V2 = V1.replace('version = "1.0.0"', 'version = "2.0.0"').replace(
    'epoch_epsilon = "4.0"', 'epoch_epsilon = "40.0"'
)


def request(epoch: int) -> dl.ReleaseRequest:
    return dl.ReleaseRequest(epoch=epoch, metric="clipped_mean_loss", region="eu-west",
                             cohort=2400)  # fmt: skip


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    assert V2 != V1
    (tmp_path / "v2.toml").write_text(V2)
    path = tmp_path / "v.db"
    v1, v2 = dl.Policy.from_toml(V1, source="v1"), dl.Policy.from_toml(V2, source="v2")
    with dl.Ledger.open(path, v1, mode="create") as ledger:
        ledger.release(request(0), 1000.0)  # epoch 0: bound to v1 (ε_eval 1)
    with dl.Ledger.open(path, v2) as ledger:
        ledger.release(request(1), 1000.0)  # epoch 1: bound to v2 (ε_eval 10)
    return path


def test_each_epoch_s_views_use_its_bound_policy(ledger_path: Path) -> None:
    v1, v2 = dl.Policy.from_toml(V1, source="v1"), dl.Policy.from_toml(V2, source="v2")
    for opened in (v1, v2):
        with dl.Ledger.open(ledger_path, opened, mode="read") as ledger:
            assert ledger.epoch_policy(0).version == "1.0.0"  # type: ignore[union-attr]
            assert ledger.epoch_policy(1).version == "2.0.0"  # type: ignore[union-attr]
            assert ledger.epoch_policy(2) is None
            assert ledger.remaining(0, "eu-west").amount == 1 - Fraction(1, 5)
            assert ledger.remaining(1, "eu-west").amount == 10 - Fraction(2)  # v2 charges 2
            assert ledger.remaining(2, "eu-west").amount == opened.eval_budget  # unopened


def test_ledger_show_prints_the_bound_budgets(
    ledger_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ledger", "show", "--policy", str(ledger_path.parent / "v2.toml"),
                 "--ledger", str(ledger_path), "--json"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "49/5" not in out.split('"epoch": 1')[0]  # epoch 0 is v1's: 4/5 left, not 49/5


def test_plan_refuses_an_epoch_bound_to_another_policy(
    ledger_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v2 = str(ledger_path.parent / "v2.toml")
    argv = ["plan", v2, "--ledger", str(ledger_path), "--cohort", "eu-west=2400"]
    assert main([*argv, "--epoch", "0"]) == 2
    assert "epoch 0 is bound to policy spatial-eval 1.0.0" in capsys.readouterr().err
    assert main([*argv, "--epoch", "1"]) == 0
    with (
        dl.Ledger.open(ledger_path, dl.Policy.load(v2), mode="read") as ledger,
        pytest.raises(dl.InvalidInput, match="bound to policy"),
    ):
        dl.plan(dl.Policy.load(v2), {"eu-west": 2400}, ledger=ledger, epoch=0)


def test_a_region_a_later_version_added_has_a_view_in_an_earlier_epoch(tmp_path: Path) -> None:
    """The views checked a region against the epoch's policy only: a v2 adding a region
    made `ledger show`, the service's budget routes and the page fail (review s24)."""
    v1 = dl.Policy.from_toml(V1, source="v1")
    added = V1.replace('version = "1.0.0"', 'version = "2.0.0"').replace('"apac"]', '"apac", "sa"]')
    assert added.count('"sa"') == 1
    (tmp_path / "v2.toml").write_text(added)
    v2 = dl.Policy.load(tmp_path / "v2.toml")
    path = tmp_path / "v.db"
    with dl.Ledger.open(path, v1, mode="create") as ledger:
        ledger.release(request(0), 1000.0)
    with dl.Ledger.open(path, v2, mode="read") as ledger:
        assert ledger.remaining(0, "sa").amount == v1.eval_budget  # no release touched sa
        assert ledger.metric_spent(0, "sa", "clipped_mean_loss").amount == 0
        with pytest.raises(dl.InvalidInput, match="unknown region"):
            ledger.remaining(0, "nowhere")
    argv = ["ledger", "show", "--policy", str(tmp_path / "v2.toml"), "--ledger", str(path)]
    assert main(argv) == 0
