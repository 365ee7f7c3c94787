"""Signing out of the page ends the session on the server (audit 2, finding 11).

"Sign out" (POST /logout) only deleted the browser's cookie: a copy of it still signed in
for the session's 8 hours. Sign-out now moves the key's session count in the service
store, so every page session of that key made before it is void, on every replica, at
once; the key itself, its bearer use and other keys' sessions are untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from _service import Served, Site, call, make_site

from dpledger.service import create_app
from dpledger.service.auth import SESSION_COOKIE, Authenticator
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


def key_id(site: Site, role: str) -> str:
    return site.principals[role].split("/")[1]


def sign_in(app: Any, site: Site, role: str = "reader") -> str:
    r = call(app, "POST", "/login", data={"key": site.keys[role]})
    assert r.status_code == 303
    return str(r.cookies[SESSION_COOKIE])


def page(app: Any, session: str) -> int:
    r = call(app, "GET", "/", headers={"Cookie": f"{SESSION_COOKIE}={session}"})
    return int(r.status_code)


def sign_out(app: Any, session: str | None) -> Any:
    headers = {} if session is None else {"Cookie": f"{SESSION_COOKIE}={session}"}
    return call(app, "POST", "/logout", headers=headers)


def test_the_old_cookie_no_longer_signs_in_after_sign_out(app: Any, site: Site) -> None:
    session = sign_in(app, site)
    assert page(app, session) == 200
    r = sign_out(app, session)
    assert (r.status_code, r.headers["location"]) == (303, "/login")
    assert f'{SESSION_COOKIE}=""' in r.headers["set-cookie"]  # the browser forgets it too
    assert page(app, session) == 303  # a kept copy is void on the server


def test_sign_out_ends_that_keys_sessions_only(app: Any, site: Site) -> None:
    first, second = sign_in(app, site), sign_in(app, site)  # two browsers, one key
    admin = sign_in(app, site, "admin")
    sign_out(app, first)
    assert page(app, first) == 303
    assert page(app, second) == 303  # sign-out ends every session of the key
    assert page(app, admin) == 200  # another key's session is untouched
    again = sign_in(app, site)  # the key itself still works
    assert page(app, again) == 200
    assert call(app, "GET", "/v1/budget/0", headers=site.auth("reader")).status_code == 200


def test_sign_out_without_a_valid_session_changes_nothing(app: Any, site: Site) -> None:
    session = sign_in(app, site)
    for cookie in (None, "garbage", session[:-1] + ("0" if session[-1] != "0" else "1")):
        r = sign_out(app, cookie)
        assert r.status_code == 303
    assert page(app, session) == 200  # a forged cookie cannot sign anyone out


def test_a_sign_out_reaches_every_replica_at_once(site: Site) -> None:
    where = default_location(site.ledger)
    with ServiceStore.open(where) as one, ServiceStore.open(where) as two:
        a, b = Authenticator(one), Authenticator(two)
        key = one.key(key_id(site, "reader"))
        assert key is not None
        session = a.session_for(key, now=1000.0)
        assert b.from_session(session, now=1010.0) == key
        assert b.end_session(session, now=1010.0) == key
        assert a.from_session(session, now=1020.0) is None
        assert one.session_epoch(key.key_id) == two.session_epoch(key.key_id) == 1
        fresh = a.session_for(key, now=1030.0)
        assert b.from_session(fresh, now=1040.0) == key
        assert a.end_session(session, now=1040.0) is None  # an ended session ends nothing
        assert b.from_session(fresh, now=1050.0) == key


def test_session_counts_are_kept_per_key_in_the_store(site: Site) -> None:
    where = default_location(site.ledger)
    reader, admin = key_id(site, "reader"), key_id(site, "admin")
    with ServiceStore.open(where) as store:
        assert store.session_epoch(reader) == 0
        store.end_sessions(reader)
        store.end_sessions(reader)
        assert store.session_epoch(reader) == 2
        assert store.session_epoch(admin) == 0
    with ServiceStore.open(where, read_only=True) as again:
        assert again.session_epoch(reader) == 2
        assert [k.key_id for k in again.list_keys() if k.key_id == reader] == [reader]


@pytest.mark.slow
def test_a_real_server_ends_the_session_on_sign_out(tmp_path: Path) -> None:
    site = make_site(str(tmp_path / "ledger.db"), tmp_path)
    with Served(site, log=tmp_path / "serve.log") as server:
        with httpx2.Client(base_url=server.url, timeout=30) as browser:
            r = browser.post("/login", data={"key": site.keys["reader"]})
            assert r.status_code == 303
            kept = r.cookies[SESSION_COOKIE]
            assert browser.get("/").status_code == 200
            assert browser.post("/logout").status_code == 303
        with httpx2.Client(base_url=server.url, timeout=30) as copy:
            r = copy.get("/", headers={"Cookie": f"{SESSION_COOKIE}={kept}"})
            assert (r.status_code, r.headers["location"]) == (303, "/login")
