"""Review 40 (service): ``/v1/whoami/`` is a 404, not a 307 to an absolute URL.

Starlette's slash redirect answered an authenticated ``POST /v1/releases/`` with ``307
Location: http://<Host header>/v1/releases``: the scheme is the one the app sees (``http``
behind a TLS-terminating proxy) and the host the one the client sent, and a 307 tells
the client to send the same body there. A client that follows it re-sends its aggregate
(and, for many clients on the same host, its key) in clear text, or to a host of the
Host header's choosing. Paths are now matched as written: a trailing slash is a 404.
"""

from __future__ import annotations

from typing import Any

import pytest
from _service import Site, body, call, snapshot


@pytest.mark.parametrize(
    ("method", "path", "role"),
    [("GET", "/v1/whoami/", "reader"), ("POST", "/v1/releases/", "north"),
     ("POST", "/v1/check/", "north"), ("GET", "/v1/budget/0/", "reader")],
)  # fmt: skip
def test_a_trailing_slash_is_not_redirected(
    app: Any, site: Site, method: str, path: str, role: str
) -> None:
    before = snapshot(site.ledger)
    headers = {**site.auth(role), "host": "evil.example"}
    kw: dict[str, Any] = {"json": body()} if method == "POST" else {}
    r = call(app, method, path, headers=headers, **kw)
    assert r.status_code == 404, (r.status_code, r.headers)
    assert "location" not in r.headers
    assert r.json()["error"] == "http_404"
    assert snapshot(site.ledger) == before


def test_the_paths_as_written_still_answer(app: Any, site: Site) -> None:
    assert call(app, "GET", "/v1/whoami", headers=site.auth("reader")).status_code == 200
    assert call(app, "GET", "/login").status_code == 200
