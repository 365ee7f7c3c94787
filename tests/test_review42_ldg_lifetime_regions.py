"""Review 42 (ldg): ``Ledger.lifetime("*")`` (``dpledger ledger lifetime``) re-scanned an
epoch's entries once per region in view, and every region any epoch ever spent in is in
view: with open regions that is quadratic (1,000 regions × 20 epochs: 2.3 s of a 4.4 s
run in that one loop; 10^4 regions over 10^5 entries, minutes). Each epoch's entries are
now summed per region in one pass, with the same figures (compared here against the
per-region definition). Counted, not timed."""

from __future__ import annotations

import warnings
from fractions import Fraction
from pathlib import Path

import pytest

import dpledger as dl
from dpledger.ledger import lifetime as lifetime_module

OPEN = """
name = "open"
version = "1"
neighbouring = "replace"
{definition}
eval_fraction = "0.25"
allocation = "pooled"
[regions]
open = true
[metrics.loss]
kind = "scalar_mean"
{charge}
clip = {{ low = "0", high = "1", source = "t" }}
"""


def _rho(e: dl.Entry) -> Fraction:
    c = e.draft.charge
    return c.amount if c.unit == "rho" else c.amount**2 / 2


@pytest.mark.parametrize("zcdp", [False, True])
def test_worst_region_lifetime_is_one_pass_per_epoch_and_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, zcdp: bool
) -> None:
    text = OPEN.format(
        definition='definition = "zcdp"\nepoch_rho = "40"' if zcdp else 'epoch_epsilon = "40"',
        charge='rho = "0.01"' if zcdp else 'epsilon = "0.1"',
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        p = dl.Policy.from_toml(text)
    plan = {  # epoch -> regions released in (with repeats), "*" global
        0: ["a", "a", "b", "*"],
        1: ["c", "*", "*"],
        2: ["*"],
        4: ["d", "e", "e", "e", "a"],
    }
    with dl.Ledger.open(tmp_path / "l.db", p, mode="create") as ledger:
        ledger.release_round(
            [
                (dl.ReleaseRequest(epoch=e, metric="loss", region=r, cohort=100), 50.0)
                for e, regions in plan.items()
                for r in regions
            ]
        )
        entries = ledger.entries()
        calls: list[int] = []
        rho_of = lifetime_module._rho_of
        monkeypatch.setattr(lifetime_module, "_rho_of", lambda e: (calls.append(1), rho_of(e))[1])
        life = ledger.lifetime("*")
    assert len(calls) == len(entries)  # once per entry, not once per (region, entry)
    names = {e.draft.region for e in entries} - {"*"}
    releases, rho, eps = 0, Fraction(0), Fraction(0)
    for epoch in plan:  # the definition: per epoch, the worst region's client
        mine = [e for e in entries if e.draft.epoch == epoch]
        touching = [[e for e in mine if e.draft.region in (r, "*")] for r in names]
        releases += max(len(t) for t in touching)
        rho += max(sum((_rho(e) for e in t), Fraction(0)) for t in touching)
        eps += max(sum((e.draft.charge.amount for e in t), Fraction(0)) for t in touching)
    assert (life.releases, life.rho) == (releases, rho)
    assert life.epsilon_basic == (None if zcdp else eps)
    assert releases == 3 + 3 + 1 + 3  # a,a,*; c,*,*; *; e,e,e
