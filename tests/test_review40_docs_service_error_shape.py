"""Review 40 (docs): docs/service.md says every error has one JSON shape, ``{error,
message, failed_checks, verdict?, budget?, errors?}`` (``failed_checks`` always there).
The transport-level errors (a body JSON cannot parse, 400; an unknown path, 404; a wrong
method, 405; a body over the limit, 413) answered ``{error, message}`` only, so a client
reading ``failed_checks`` failed on them alone."""

from __future__ import annotations

from typing import Any

import pytest
from _service import Site, call

pytest.importorskip("fastapi")


def test_transport_errors_carry_failed_checks(app: Any, site: Site) -> None:
    headers = {**site.auth("admin"), "content-type": "application/json"}
    answers = [
        call(app, "POST", "/v1/releases", content=b"[" * 5000 + b"]" * 5000, headers=headers),
        call(app, "GET", "/v1/no-such-thing", headers=site.auth("reader")),
        call(app, "DELETE", "/v1/releases", headers=site.auth("admin")),
    ]
    assert [r.status_code for r in answers] == [400, 404, 405]
    for r in answers:
        body = r.json()
        assert body["error"] == f"http_{r.status_code}"
        assert body["failed_checks"] == [], body
