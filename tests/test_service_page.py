"""The privacy team's page in a real headless Chromium, as a person uses it.

A real ``dpledger serve`` runs on 127.0.0.1; two teams release through its API and one
is refused. A person opens ``/``, is sent to sign in, pastes a read key, and reads the
budget table, the burn-down chart, who released what, the refusals, the verify status
and the chain head to copy. Debian's ``/usr/bin/chromium`` is driven by Playwright
(the ``chromium`` fixture in ``conftest.py`` skips loudly if it cannot start).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
from _service import Served, Site, body, make_site

from dpledger.ledger import Ledger

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    where: Path = tmp_path_factory.mktemp("page")
    site = make_site(str(where / "ledger.db"), where)
    with Served(site, log=where / "serve.log") as server:
        with httpx2.Client(base_url=server.url, timeout=30) as http:
            for region, role in (("north", "north"), ("north", "north"), ("south", "admin")):
                r = http.post("/v1/releases", json=body(region), headers=site.auth(role))
                assert r.status_code == 201, r.text
            refused = http.post("/v1/releases", json=body("south"), headers=site.auth("north"))
            assert refused.status_code == 403
        yield site, server


def test_a_person_signs_in_and_reads_budgets_releases_and_the_chain_head(
    chromium: Any, served: tuple[Site, Served], tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    site, server = served
    context = chromium.new_context(viewport={"width": 1100, "height": 900})
    try:
        page = context.new_page()
        page.goto(server.url + "/")
        expect(page).to_have_url(server.url + "/login")  # not signed in: sent to sign in
        key = site.keys["reader"]
        page.get_by_label("API key").fill(key[:-1] + ("x" if key[-1] != "x" else "y"))
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#login-error")).to_contain_text("not valid")

        page.get_by_label("API key").fill(site.keys["reader"])
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Privacy budget ledger")).to_be_visible()
        expect(page.locator("#viewer")).to_have_text(site.principals["reader"])

        north = page.locator("#budget-table tr[data-epoch='0'][data-region='north']")
        expect(north.locator("td.spent")).to_have_text("0.2")  # two releases of ε 0.1
        expect(north.locator("td.remaining")).to_have_text("0.8")
        south = page.locator("#budget-table tr[data-epoch='0'][data-region='south']")
        expect(south.locator("td.remaining")).to_have_text("0.9")
        expect(page.locator("#burndown rect.bar")).to_have_count(3)  # one epoch × 3 regions

        releases = page.locator("#releases-table tbody tr")
        expect(releases).to_have_count(3)
        expect(releases.first.locator("td.principal")).to_have_text(site.principals["admin"])
        expect(releases.nth(1).locator("td.principal")).to_have_text(site.principals["north"])
        refusals = page.locator("#refusals-table tbody tr")
        expect(refusals.first).to_contain_text(site.principals["north"])
        expect(refusals.first).to_contain_text("scope: region south")

        with Ledger.open(site.ledger, site.policy, mode="read") as ledger:
            seq, digest = ledger.head()
        expect(page.locator("#verify-status")).to_contain_text("Verified: 3 entries")
        expect(page.locator("#chain-head")).to_have_text(f"{seq}:{digest}")
        page.screenshot(path=str(tmp_path / "page.png"), full_page=True)

        page.get_by_role("button", name="Sign out").click()
        expect(page).to_have_url(server.url + "/login")
        page.goto(server.url + "/")
        expect(page).to_have_url(server.url + "/login")  # the session is gone
    finally:
        context.close()


def test_the_page_runs_no_script_and_the_browser_cannot_read_the_session(
    chromium: Any, served: tuple[Site, Served]
) -> None:
    site, server = served
    context = chromium.new_context()
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(server.url + "/login")
        page.get_by_label("API key").fill(site.keys["reader"])
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_selector("#chain-head")
        assert page.evaluate("document.cookie") == ""  # HttpOnly: no script can read it
        (cookie,) = context.cookies()
        assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")
        assert site.keys["reader"].split("_", 2)[2] not in cookie["value"]
        assert errors == []
    finally:
        context.close()
