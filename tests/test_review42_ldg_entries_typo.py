"""Review 42 (ldg): ``Ledger.entries(region=..., metric=...)`` (and ``GET /v1/entries``)
answered a typo — a region or metric no policy of the ledger ever had — with an empty
list, which reads as "nothing was released there", while ``spent``/``metric_spent``
refuse the same name. An empty answer now checks the names: one that neither the
opening policy nor any version the entries were released under has is ``InvalidInput``
naming the known ones; a region or metric of an older version, an epoch with nothing in
a known region, and '*' stay plain filters."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from _service import Site, body, call
from _stores import StoreUnderTest

import dpledger as dl

POLICY = """
name = "u"
version = "{v}"
neighbouring = "replace"
epoch_epsilon = "4"
allocation = "pooled"
[regions]
names = [{regions}]
[metrics.{metric}]
kind = "scalar_mean"
epsilon = "0.1"
clip = {{ low = "0", high = "1", source = "t" }}
"""


def _policy(v: str, regions: str, metric: str) -> dl.Policy:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        return dl.Policy.from_toml(POLICY.format(v=v, regions=regions, metric=metric))


def test_a_typo_in_an_entries_filter_is_refused(store: StoreUnderTest, tmp_path: Path) -> None:
    v1 = _policy("1", '"north", "south"', "loss")
    v2 = _policy("2", '"north", "west"', "score")
    with dl.Ledger.open(store.target, v1, mode="create") as ledger:
        ledger.release(dl.ReleaseRequest(epoch=0, metric="loss", region="south", cohort=9), 5.0)
    with dl.Ledger.open(store.target, v2, mode="read") as ledger:
        assert len(ledger.entries(region="south", metric="loss")) == 1  # v1's names
        assert ledger.entries(region="west") == []  # v2's: nothing there yet
        assert ledger.entries(region="north", epoch=3) == []
        assert ledger.entries(region="*") == []
        assert ledger.entries(metric="score") == []
        with pytest.raises(dl.InvalidInput, match=r"unknown region 'nrth'.*'north'"):
            ledger.entries(region="nrth")
        with pytest.raises(dl.InvalidInput, match=r"unknown metric 'los'.*'loss'"):
            ledger.entries(metric="los")


def test_the_service_refuses_a_typo_as_input(app: Any, site: Site) -> None:
    assert call(app, "POST", "/v1/releases", json=body(), headers=site.auth("admin")).is_success
    r = call(app, "GET", "/v1/entries?region=nrth", headers=site.auth("reader"))
    assert (r.status_code, r.json()["error"]) == (422, "invalid_input"), r.text
    assert "unknown region 'nrth'" in r.json()["message"]
    r = call(app, "GET", "/v1/entries?region=north&epoch=9", headers=site.auth("reader"))
    assert (r.status_code, r.json()["entries"]) == (200, [])
