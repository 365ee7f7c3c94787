"""The demo refuses a fleet too small to release anything, up front, with the minimum."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from dpledger import Ledger, Policy
from dpledger.cli.main import main
from dpledger.errors import InvalidInput
from dpledger.sim.demo import (
    DEFAULT_POLICY,
    Progress,
    _easiest_floor,
    minimum_clients,
    release_epoch,
    run_demo,
)
from dpledger.sim.fleet import make_fleet, region_sizes


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.load(DEFAULT_POLICY)


def test_region_sizes_match_the_fleet_make_fleet_builds() -> None:
    names = ("eu-west", "eu-east", "na", "apac")
    for n in (1, 7, 133, 1540):
        fleet = make_fleet(n_clients=n, seed=0, regions=names)
        assert region_sizes(n, names) == {r: len(fleet.client_range(r)) for r in names}


def test_minimum_clients_is_the_least_fleet_whose_largest_region_reaches_the_floor(
    policy: Policy,
) -> None:
    least, floor = minimum_clients(policy), _easiest_floor(policy)
    assert least is not None
    assert floor is not None
    names = policy.regions.names
    assert max(region_sizes(least, names).values()) >= floor
    assert max(region_sizes(least - 1, names).values()) < floor


@pytest.mark.parametrize("clients", [4, 50, 1000])
def test_a_too_small_fleet_is_refused_up_front_naming_the_minimum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], clients: int, policy: Policy
) -> None:
    db = tmp_path / "d.db"
    assert main(["demo", "--clients", str(clients), "--ledger", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"at least {minimum_clients(policy)} clients" in err
    assert "ReleaseRequest" not in err
    assert "Traceback" not in err
    assert not db.exists()  # refused before any file was claimed


def test_the_minimum_fleet_releases_something(tmp_path: Path, policy: Policy) -> None:
    least = minimum_clients(policy)
    assert least is not None
    result = run_demo(n_clients=least, ledger_path=tmp_path / "d.db", progress=None)
    assert result.releases
    with pytest.raises(InvalidInput, match="too small"):
        run_demo(n_clients=least - 1, ledger_path=tmp_path / "e.db", progress=None)


def test_an_empty_region_gets_no_request_with_cohort_zero(tmp_path: Path, policy: Policy) -> None:
    zero = {r: np.zeros(1) for r in policy.regions.names}
    sums = {m: dict(zero) for m in policy.metrics}
    cohorts = dict.fromkeys(policy.regions.names, 0)
    with Ledger.open(tmp_path / "z.db", policy, mode="create") as ledger:
        releases, refusals = release_epoch(ledger, sums, cohorts)
    assert releases == []
    assert refusals == []


def test_an_unfinished_progress_bar_ends_its_line_on_close() -> None:
    out = io.StringIO()
    bar = Progress(3, out)
    bar.step("one")
    bar.close()
    assert out.getvalue().endswith("\n")
    done = io.StringIO()
    full = Progress(1, done)
    full.step("all")
    full.close()
    assert done.getvalue().count("\n") == 1
