"""Budget views read the budget of the policy an epoch is bound to (audit 2, finding 3).

An epoch is bound to the policy of its first release; a release in it under another
version is refused. The views used the opening policy's budget instead: opened with a
v2 whose ε_eval is 10×, epoch 0 (bound to v1, 1/5 spent of 1) showed 49/5 left in
``remaining``, ``ledger show`` and the service, and ``plan --ledger --epoch 0`` said
"fits" for an epoch that refuses every release under v2.
"""

from __future__ import annotations

import json
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


V3 = V1.replace('version = "1.0.0"', 'version = "3.0.0"').replace(
    '"na", "apac"]', '"na"]'
)  # removes region apac


@pytest.fixture
def removed(tmp_path: Path) -> Path:
    """Epoch 0 bound to v1, where apac spent 1/5; epoch 1 bound to v3, which has no apac."""
    assert V3.count('"apac"') == 0
    (tmp_path / "v3.toml").write_text(V3)
    v1, v3 = dl.Policy.from_toml(V1, source="v1"), dl.Policy.load(tmp_path / "v3.toml")
    path = tmp_path / "r.db"
    with dl.Ledger.open(path, v1, mode="create") as ledger:
        ledger.release(dl.ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="apac",
                                         cohort=2400), 1000.0)  # fmt: skip
    with dl.Ledger.open(path, v3) as ledger:
        ledger.release(request(1), 1000.0)
    return path


def test_ledger_show_lists_a_region_a_later_version_removed_in_the_epochs_that_had_it(
    removed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ledger show` listed the opening policy's regions only: under a v3 without apac,
    epoch 0 showed every region untouched while apac had spent 1/5 (audit 3, finding 7)."""
    argv = ["ledger", "show", "--policy", str(removed.parent / "v3.toml"), "--ledger",
            str(removed), "--json"]  # fmt: skip
    assert main(argv) == 0
    rows = {(r["epoch"], r["region"]): r for r in json.loads(capsys.readouterr().out)["regions"]}
    assert rows[(0, "apac")]["spent"] == "1/5"
    assert rows[(0, "apac")]["remaining"] == "4/5"
    assert rows[(0, "eu-west")]["spent"] == "0"
    assert (1, "apac") not in rows  # epoch 1's policy (v3) and the opening one lack it
    assert rows[(1, "eu-west")]["spent"] == "1/5"
    assert main(argv[:-1]) == 0
    assert "epoch    0  apac         spent ε      1/5  left 4/5" in capsys.readouterr().out


def test_the_service_lists_a_region_a_later_version_removed_in_the_epochs_that_had_it(
    removed: Path,
) -> None:
    """The budget routes and the page read the served policy's regions only: under v3,
    GET /v1/budget/0/apac was 404 and /v1/budget/0 and the page omitted apac."""
    from _service import call

    from dpledger.service import create_app
    from dpledger.service.keys import Scopes
    from dpledger.service.state import Settings
    from dpledger.service.store import ServiceStore, default_location

    with ServiceStore.open(default_location(str(removed)), create=True) as store:
        made, _ = store.create_key("reader", Scopes(("read",)))
    auth = {"Authorization": f"Bearer {made.token}"}
    app = create_app(
        Settings(ledger=str(removed), policy=dl.Policy.load(removed.parent / "v3.toml"))
    )
    try:
        epoch0 = call(app, "GET", "/v1/budget/0", headers=auth).json()
        rows = {row["region"]: row for row in epoch0["regions"]}
        assert list(rows) == ["eu-west", "eu-east", "na", "apac", "*"]
        assert rows["apac"]["spent"]["amount"] == "1/5"
        assert rows["apac"]["remaining"]["amount"] == "4/5"
        detail = call(app, "GET", "/v1/budget/0/apac", headers=auth)
        assert detail.status_code == 200, detail.text
        assert detail.json()["spent"]["amount"] == "1/5"
        spent = {m["metric"]: m["spent"]["amount"] for m in detail.json()["metrics"]}
        assert spent["clipped_mean_loss"] == "1/5"
        epoch1 = call(app, "GET", "/v1/budget/1", headers=auth).json()
        assert "apac" not in {row["region"] for row in epoch1["regions"]}
        gone = call(app, "GET", "/v1/budget/1/apac", headers=auth)
        assert (gone.status_code, gone.json()["error"]) == (404, "unknown_resource")
        life = call(app, "GET", "/v1/lifetime/apac", headers=auth)  # its recorded spend
        assert life.status_code == 200, life.text
        assert life.json()["releases"] == 1
        mars = call(app, "GET", "/v1/lifetime/mars", headers=auth)
        assert (mars.status_code, mars.json()["error"]) == (404, "unknown_resource")
        assert "epoch 1's regions: ['eu-west', 'eu-east', 'na']" in gone.json()["message"]
        page = call(app, "GET", "/", headers=auth)
        assert page.status_code == 200, page.text
        assert "data-epoch='0' data-region='apac'" in page.text
        assert "data-epoch='1' data-region='apac'" not in page.text
    finally:
        app.state.service.close()


def test_ledger_show_lists_the_regions_an_open_region_epoch_spent_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With open regions `ledger show` listed '*' only (the service listed the spent ones):
    the shared helper lists the regions the epoch spent in, as the service does."""
    text = V1.replace('names = ["eu-west", "eu-east", "na", "apac"]', "open = true")
    assert "open = true" in text
    (tmp_path / "open.toml").write_text(text)
    path = tmp_path / "o.db"
    with dl.Ledger.open(path, dl.Policy.load(tmp_path / "open.toml"), mode="create") as ledger:
        ledger.release(dl.ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="mars",
                                         cohort=2400), 1000.0)  # fmt: skip
    argv = ["ledger", "show", "--policy", str(tmp_path / "open.toml"), "--ledger", str(path),
            "--json"]  # fmt: skip
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)["regions"]
    assert [(r["region"], r["spent"]) for r in rows] == [("mars", "1/5"), ("*", "1/5")]


def test_the_lifetime_of_a_region_a_later_version_removed_counts_its_spend(
    removed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its clients spent 1/5 in epoch 0: the lifetime view refused the region as unknown
    under v3 (left by fix25v, closed at stop 25)."""
    v3 = dl.Policy.load(removed.parent / "v3.toml")
    with dl.Ledger.open(removed, v3, mode="read") as ledger:
        life = ledger.lifetime("apac")
        assert (life.releases, life.epsilon_basic) == (1, Fraction(1, 5))
        with pytest.raises(dl.InvalidInput, match="unknown region 'mars'"):
            ledger.lifetime("mars")
    argv = ["ledger", "lifetime", "--policy", str(removed.parent / "v3.toml"), "--ledger",
            str(removed), "--region", "apac"]  # fmt: skip
    assert main(argv) == 0
    assert "apac" in capsys.readouterr().out
