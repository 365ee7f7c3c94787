"""Who may spend: 401 without a valid key, 403 outside a key's scopes, and the ledger
byte-identical after every such refusal, on SQLite and on a real PostgreSQL.

A key is checked in constant time: an unknown key id costs the same hash and comparison
as a known one (shown by counting the work, never by timing).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _service import Site, body, call, make_site, snapshot

from dpledger.ledger import Ledger
from dpledger.service import create_app, keys
from dpledger.service.auth import Authenticator
from dpledger.service.store import ServiceStore, default_location


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Site:
    if request.param == "sqlite":
        return make_site(str(tmp_path / "ledger.db"), tmp_path)
    return make_site(request.getfixturevalue("pg_url"), tmp_path)


@pytest.fixture
def app(site: Site) -> Iterator[Any]:
    made = create_app(site.settings(connections=2))
    yield made
    made.state.service.close()


def wrong_secret(token: str) -> str:
    return token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")


def unknown_id(token: str) -> str:
    prefix, key_id, secret = token.split("_", 2)
    return f"{prefix}_{'0' * 12 if key_id != '0' * 12 else 'f' * 12}_{secret}"


UNAUTHENTICATED = {
    "no key": lambda site: {},
    "not a bearer": lambda site: {"Authorization": f"Basic {site.keys['north']}"},
    "malformed": lambda site: {"Authorization": "Bearer dpl_not-a-key"},
    "wrong secret": lambda site: {"Authorization": f"Bearer {wrong_secret(site.keys['north'])}"},
    "unknown id": lambda site: {"Authorization": f"Bearer {unknown_id(site.keys['north'])}"},
    "revoked": lambda site: site.auth("revoked"),
}


@pytest.mark.parametrize("case", list(UNAUTHENTICATED))
def test_without_a_valid_key_a_release_is_401_and_the_ledger_is_untouched(
    app: Any, site: Site, case: str
) -> None:
    before = snapshot(site.ledger)
    r = call(app, "POST", "/v1/releases", json=body(), headers=UNAUTHENTICATED[case](site))
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    assert r.json() == {  # one answer for every cause
        "error": "not_authenticated",
        "message": "a valid API key is required: send `Authorization: Bearer dpl_<id>_<secret>`",
        "failed_checks": [],
    }
    assert snapshot(site.ledger) == before
    with ServiceStore.open(default_location(site.ledger)) as store:
        assert store.refusals() == []  # nobody to attribute it to: the operator's log has it


OUT_OF_SCOPE = {
    "an action it lacks": ("reader", body(), "action release"),
    "another region": ("north", body("south"), "region south"),
    "another metric": ("north", {**body(), "request": {**body()["request"], "metric": "loss_b"}},
                       "metric loss_b"),
    "the global release": ("north", body("*"), "the global release (region '*')"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(OUT_OF_SCOPE))
def test_outside_its_scopes_a_key_gets_403_and_the_ledger_is_untouched(
    app: Any, site: Site, case: str
) -> None:
    role, payload, missing = OUT_OF_SCOPE[case]
    before = snapshot(site.ledger)
    r = call(app, "POST", "/v1/releases", json=payload, headers=site.auth(role))
    assert r.status_code == 403
    assert r.json()["error"] == "not_permitted"
    assert r.json()["failed_checks"] == [f"scope: {missing}"]
    assert snapshot(site.ledger) == before
    with ServiceStore.open(default_location(site.ledger)) as store:
        (logged,) = store.refusals()
    assert (logged.principal, logged.status) == (site.principals[role], 403)
    assert logged.failed == (f"scope: {missing}",)


def test_an_action_is_refused_before_the_body_is_read(app: Any, site: Site) -> None:
    """A reader's malformed release is a 403, not a 422: nothing of it was parsed."""
    r = call(
        app,
        "POST",
        "/v1/releases",
        content=b"{not json",
        headers={**site.auth("reader"), "content-type": "application/json"},
    )
    assert r.status_code == 403
    r = call(app, "POST", "/v1/releases", content=b"{not json", headers={"content-type": "x"})
    assert r.status_code == 401


@pytest.mark.parametrize(
    "aggregate",
    [b"NaN", b"1e999", b'"800"', b"[1, 2, 3]", b"5000.0", b"800.0", b"9" * 5000],
    ids=["nan", "inf", "a string", "wrong shape", "outside the clip", "valid", "5000 digits"],
)
@pytest.mark.parametrize("path", ["/v1/releases", "/v1/check"])
def test_a_scope_refusal_does_not_depend_on_the_aggregate(
    app: Any, site: Site, aggregate: bytes, path: str
) -> None:
    """Out of scope is 403 (and logged) whatever the aggregate: scopes are decided on the
    request's public fields before the body is validated or the library checks it."""
    before = snapshot(site.ledger)
    content = b'{"request": {"epoch": 0, "metric": "loss", "region": "south", "cohort": 1000}, '
    r = call(
        app,
        "POST",
        path,
        content=content + b'"aggregate": ' + aggregate + b"}",
        headers={**site.auth("north"), "content-type": "application/json"},
    )
    assert r.status_code == 403, r.text
    assert r.json()["failed_checks"] == ["scope: region south"]
    assert snapshot(site.ledger) == before
    with ServiceStore.open(default_location(site.ledger)) as store:
        (logged,) = store.refusals()
    assert (logged.region, logged.metric, logged.epoch) == ("south", "loss", 0)


def test_a_key_in_scope_spends_and_the_same_key_is_refused_once_revoked(
    app: Any, site: Site
) -> None:
    assert call(app, "POST", "/v1/releases", json=body(), headers=site.auth("north")).is_success
    with ServiceStore.open(default_location(site.ledger)) as store:
        store.revoke(site.principals["north"].split("/")[1])
    before = snapshot(site.ledger)
    r = call(app, "POST", "/v1/releases", json=body(), headers=site.auth("north"))
    assert r.status_code == 401
    assert snapshot(site.ledger) == before
    with Ledger.open(site.ledger, site.policy, mode="read") as ledger:
        assert [e.draft.principal for e in ledger.entries()] == [site.principals["north"]]
        assert ledger.epochs() == (0,)


def test_hit_and_miss_do_the_same_work(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """One digest and one constant-time comparison for a known key, a wrong secret and an
    unknown id alike: no timing oracle on the secret beyond the lookup by (public) id."""
    calls: list[str] = []
    real_digest, real_compare = keys.digest, keys.hmac.compare_digest
    monkeypatch.setattr(
        keys, "digest", lambda s, salt: calls.append("digest") or real_digest(s, salt)
    )
    monkeypatch.setattr(
        keys.hmac, "compare_digest", lambda a, b: calls.append("compare") or real_compare(a, b)
    )
    with ServiceStore.open(default_location(site.ledger)) as store:
        auth = Authenticator(store)
        token = site.keys["north"]
        for presented, ok in (
            (token, True),
            (wrong_secret(token), False),
            (unknown_id(token), False),
        ):
            calls.clear()
            key, _ = auth.authenticate(presented)
            assert (key is not None) is ok
            assert calls == ["digest", "compare"]
