"""Review 40 (service): a key scoped to one region and metric could pin a future epoch.

An epoch is bound to the policy version of its first release (the privacy model), and a
key that may release in ``north``/``loss`` could release in any epoch up to ``MAX_EPOCH``.
One release there bound that epoch, for every region and metric, to the version the
service ran then; once the operator served version 2, every release in that epoch, by any
team, was refused (409 ``epoch_policy``): a narrow key decided, ahead of time, the policy
of releases far outside its scope. Nothing was overspent, so this was an availability and
governance defect. Now a key scoped to some regions or metrics releases in no epoch past
the one after the newest opened (403, logged, nothing spent; ``check`` decides alike);
opening one further ahead takes a key with every region's and metric's scope. A ledger's
first release is open to any key: there is no "newest" yet (docs/service.md).
"""

from __future__ import annotations

from typing import Any

from _service import Site, body, call
from factories import policy_text

from dpledger.policy import Policy
from dpledger.service import create_app
from dpledger.service.state import Settings


def test_a_narrow_key_cannot_decide_a_future_epoch_s_policy_for_others(
    app: Any, site: Site
) -> None:
    north = site.auth("north")
    assert call(app, "POST", "/v1/releases", json=body(epoch=0), headers=north).status_code == 201
    for path in ("/v1/check", "/v1/releases"):
        r = call(app, "POST", path, json=body(epoch=5000), headers=north)
        assert r.status_code == 403, r.text
        assert "epoch 5000" in r.json()["message"]
    log = call(app, "GET", "/v1/refusals", headers=site.auth("reader"))
    assert "epoch 5000" in log.text
    assert call(app, "GET", "/v1/epochs", headers=site.auth("reader")).json() == {"epochs": [0]}
    # the next epoch, and an earlier one, stay open to the team's key
    assert call(app, "POST", "/v1/releases", json=body(epoch=1), headers=north).status_code == 201
    app.state.service.close()
    v2 = Policy.from_toml(policy_text(version="2"), source="v2.toml")
    upgraded = create_app(Settings(ledger=site.ledger, policy=v2, connections=1))
    try:
        r = call(upgraded, "POST", "/v1/releases", json=body("south", epoch=5000),
                 headers=site.auth("admin"))  # fmt: skip
        assert r.status_code == 201, r.text  # epoch 5000 follows the served version
    finally:
        upgraded.state.service.close()


def test_a_dry_run_binds_nothing(app: Any, site: Site) -> None:
    r = call(app, "POST", "/v1/check", json=body(epoch=5000), headers=site.auth("north"))
    assert r.status_code == 200, r.text
    assert call(app, "GET", "/v1/epochs", headers=site.auth("reader")).json() == {"epochs": []}
