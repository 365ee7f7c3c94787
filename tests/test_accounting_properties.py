"""Property tests of the composition algebra against an independent model of it."""

from __future__ import annotations

from fractions import Fraction

from factories import policy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpledger import ALL, BudgetExceeded, Ledger, ReleaseRequest
from dpledger.accounting import check_budget, client_loss

P = policy()
REGIONS = ("north", "south", "east")
CHARGES = {"loss": Fraction(1, 10), "loss_b": Fraction(1, 4), "hist5": Fraction(1, 2)}
AGG = {"loss": 1.0, "loss_b": 1.0, "hist5": [1.0] * 5}

steps = st.lists(
    st.tuples(
        st.integers(0, 2),  # epoch
        st.sampled_from((*REGIONS, ALL)),
        st.sampled_from(tuple(CHARGES)),
    ),
    max_size=40,
)


def model_fits(spent: dict[str, Fraction], region: str, charge: Fraction) -> bool:
    """Independent statement of the rule: every touched client stays within ε_eval = 1."""
    touched = REGIONS if region == ALL else (region,)
    return all(spent.get(ALL, 0) + spent.get(r, 0) + charge <= 1 for r in touched)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_ledger_spend_equals_the_independent_sum_and_never_exceeds_the_budget(
    seq: list[tuple[int, str, str]],
) -> None:
    ledger = Ledger.open(":memory:", P, mode="create")
    ledger.init()
    model: dict[int, dict[str, Fraction]] = {}
    for epoch, region, metric in seq:
        spent = model.setdefault(epoch, {})
        req = ReleaseRequest(
            epoch=epoch, metric=metric, region=region, cohort=50,
            edges_version="h5/v1" if metric == "hist5" else None,
        )  # fmt: skip
        expect = model_fits(spent, region, CHARGES[metric])
        try:
            ledger.release(req, AGG[metric])
            accepted = True
        except BudgetExceeded:
            accepted = False
        assert accepted == expect
        if accepted:
            spent[region] = spent.get(region, Fraction(0)) + CHARGES[metric]
    for epoch in range(3):
        for region in REGIONS:
            s = model.get(epoch, {})
            assert ledger.spent(epoch, region).amount == s.get(ALL, 0) + s.get(region, 0) <= 1
    assert ledger.verify().ok


scope_spend = st.dictionaries(
    st.sampled_from((*REGIONS, ALL)),
    st.fractions(min_value=0, max_value=1, max_denominator=1000),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(scope_spend, st.fractions(min_value=0, max_value=2, max_denominator=1000))
def test_a_global_release_fits_iff_it_fits_in_every_region(
    spent: dict[str, Fraction], charge: Fraction
) -> None:
    glob = check_budget(P, spent, 0, ALL, charge).fits
    assert glob == all(check_budget(P, spent, 0, r, charge).fits for r in REGIONS)
    assert glob == model_fits(spent, ALL, charge)


@settings(max_examples=300, deadline=None)
@given(scope_spend, st.sampled_from(REGIONS))
def test_client_loss_is_global_plus_regional_and_remaining_complements_it(
    spent: dict[str, Fraction], region: str
) -> None:
    loss = client_loss(spent, region)
    assert loss == spent.get(ALL, 0) + spent.get(region, 0)
    b = check_budget(P, spent, 0, region, Fraction(0))
    assert b.spent.amount == loss
    assert b.remaining.amount == max(P.eval_budget - loss, 0)
    assert client_loss(spent, ALL) == max(client_loss(spent, r) for r in REGIONS)
