"""Pure/Laplace vs zCDP/Gaussian at the same per-epoch (ε, δ) guarantee."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from factories import spatial

from dpledger import InvalidInput
from dpledger.accounting import zcdp_epsilon
from dpledger.cli.main import main
from dpledger.planning.definitions import compare_definitions, rho_for_epsilon


def test_rho_for_epsilon_inverts_opendps_conversion() -> None:
    rho = rho_for_epsilon(Fraction(1), 1e-6)
    assert zcdp_epsilon(rho, 1e-6) <= 1.0
    assert zcdp_epsilon(rho * Fraction(1001, 1000), 1e-6) > 1.0


def test_laplace_wins_for_scalars_and_gaussian_for_nonnegative_histograms() -> None:
    rows = {r.metric: r for r in compare_definitions(spatial(), {"na": 3000})}
    # scalars: Δ₂ = Δ₁, and one release of a small ε is cheaper in Laplace noise
    assert rows["clipped_mean_loss"].better == "pure"
    # histograms under replace: Δ₂ = √2·cap vs Δ₁ = 2·cap tips it to the Gaussian
    assert rows["error_histogram"].better == "zcdp"
    r = rows["clipped_mean_loss"]
    assert r.laplace_bar == pytest.approx(math.log(20) * 3.4 / 0.2 / 3000, rel=1e-9)
    assert r.ratio == pytest.approx(r.gaussian_bar / r.laplace_bar)


def test_unknown_region_is_refused() -> None:
    with pytest.raises(InvalidInput, match="unknown region"):
        compare_definitions(spatial(), {"mars": 10})


def test_cli_prints_the_comparison(capsys: pytest.CaptureFixture[str]) -> None:
    from factories import SPATIAL

    code = main(["plan", str(SPATIAL), "--cohort", "na=3000", "--compare-definitions"])
    assert code == 0
    out = capsys.readouterr().out
    assert "zCDP/Gaussian" in out
    assert "error_histogram" in out
