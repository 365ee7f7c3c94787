"""Review 39 (service): the page reads each epoch's share against that epoch's own budget.

An epoch is bound to the policy version of its first release, with that version's
budget (``GET /v1/budget/{epoch}`` reports it). The page divided every epoch's spend by
the *served* policy's budget instead: under a version 2 with ε_eval = 2, an epoch of
version 1 (ε_eval = 1) fully spent showed "Used 50%" beside "Remaining 0", and half spent
a bar at a quarter with the title "ε 1/2 of ε 2 left" — a privacy team reading the chart
saw budget that did not exist.
"""

from __future__ import annotations

import re
from pathlib import Path

from _service import body, call, make_site
from factories import policy_text

from dpledger.approval import ReleaseRequest
from dpledger.ledger import Ledger
from dpledger.policy import Policy
from dpledger.service import Settings, create_app


def test_an_epoch_of_an_earlier_version_is_shown_against_its_own_budget(tmp_path: Path) -> None:
    site = make_site(str(tmp_path / "ledger.db"), tmp_path, scalar_eps="0.5")  # ε_eval = 1
    with Ledger.open(site.ledger, site.policy) as ledger:  # epoch 0 under version 1
        ledger.release(ReleaseRequest(epoch=0, metric="loss", region="north", cohort=1000), 800.0)
        for _ in range(2):
            ledger.release(ReleaseRequest(epoch=0, metric="loss", region="south", cohort=1000), 8.0)
    v2 = Policy.from_toml(
        policy_text(scalar_eps="0.5", epoch_epsilon="8", version="2"), source="v2"
    )
    assert v2.eval_budget == 2
    app = create_app(Settings(ledger=site.ledger, policy=v2))
    try:
        assert call(app, "POST", "/v1/releases", json=body(epoch=1), headers=site.auth("admin"))
        api = call(app, "GET", "/v1/budget/0", headers=site.auth("admin")).json()
        assert api["eval_budget"]["amount"] == "1"
        page = call(app, "GET", "/", headers=site.auth("reader")).text
    finally:
        app.state.service.close()

    def row(epoch: int, region: str) -> str:
        found = re.search(rf"<tr data-epoch='{epoch}' data-region='{region}'>.*?</tr>", page)
        assert found is not None
        return found.group(0)

    def bar(epoch: int, region: str) -> tuple[float, str]:
        found = re.search(
            rf"<rect class='bar' data-epoch='{epoch}' data-region='{region}'[^>]*"
            r"height='([0-9.]+)'[^>]*><title>([^<]*)</title>",
            page,
        )
        assert found is not None
        return float(found.group(1)), found.group(2)

    assert row(0, "south").endswith("<td class='num'>100%</td></tr>")  # spent 1 of 1
    assert row(0, "north").endswith("<td class='num'>50%</td></tr>")  # spent 1/2 of 1
    assert row(1, "north").endswith("<td class='num'>25%</td></tr>")  # spent 1/2 of 2
    height, title = bar(0, "north")
    assert title == "epoch 0, north: ε 1/2 of ε 1 left"
    full, _ = bar(0, "east")  # nothing spent: the whole bar
    assert height == full / 2
    assert bar(1, "north")[1] == "epoch 1, north: ε 3/2 of ε 2 left"
