"""The page's markup, read by a parser as a browser would, and its sign-in redirect.

The burn-down SVG's ``aria-label`` was cut at the apostrophe of "epoch's" (a
single-quoted attribute), leaving junk attributes; a session cookie longer than 200
characters answered ``/`` with a JSON 422 instead of the redirect to /login that any
other invalid cookie gets, so a browser holding one could not reach the sign-in page.
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from _service import Site, body, call

from dpledger.service.auth import SESSION_COOKIE
from dpledger.service.page import CHART_LABEL


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def test_the_chart_label_is_one_whole_attribute(app: Any, site: Site) -> None:
    r = call(app, "POST", "/v1/releases", json=body(), headers=site.auth("admin"))
    assert r.status_code == 201, r.text
    page = call(app, "GET", "/", headers=site.auth("reader"))
    assert page.status_code == 200
    parser = _Tags()
    parser.feed(page.text)
    svgs = [attrs for tag, attrs in parser.tags if tag == "svg"]
    assert len(svgs) == 1
    assert svgs[0]["aria-label"] == CHART_LABEL == "share of each epoch's budget left, per region"
    assert set(svgs[0]) == {"id", "role", "width", "height", "aria-label"}


@pytest.mark.parametrize("length", [201, 300, 4000])
def test_an_over_long_session_cookie_is_sent_to_sign_in(app: Any, length: int) -> None:
    cookie = {"Cookie": f"{SESSION_COOKIE}={'a' * length}"}
    r = call(app, "GET", "/", headers=cookie)
    assert (r.status_code, r.headers["location"]) == (303, "/login")
    out = call(app, "POST", "/logout", headers=cookie)
    assert (out.status_code, out.headers["location"]) == (303, "/login")
