"""Review 42 (service): two services on one ledger serving two contents of one policy
version (an edited policy file whose ``version`` was not bumped).

The second service's release is refused 409 (``policy_mismatch``) once the first recorded
its content. That refusal's message quoted the ledger's location — the server's file path,
or its PostgreSQL URL (user, host, port, database) — to any API client: it now says "the
ledger" (the operator's log keeps nothing less). And ``/v1/check``, which answers "as the
release would", said 200 approved for the release it refused: the dry run now meets the
conflict as the release does.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from _service import Served, body, make_site
from factories import policy_text

from dpledger.service.testing import ServedProcess


def _two(ledger: str, tmp_path: Path) -> tuple[httpx2.Response, httpx2.Response]:
    site = make_site(ledger, tmp_path)
    edited = tmp_path / "edited.toml"
    edited.write_text(policy_text(scalar_eps="0.2"))  # same name and version 1, other contents
    with (
        Served(site, log=tmp_path / "a.log") as a,
        ServedProcess(site.ledger, edited, "--log-level", "warning", log=tmp_path / "b.log") as b,
    ):
        with httpx2.Client(base_url=a.url, headers=site.auth("admin"), timeout=60) as http:
            assert http.post("/v1/releases", json=body(epoch=0)).status_code == 201
        with httpx2.Client(base_url=b.url, headers=site.auth("admin"), timeout=60) as http:
            check = http.post("/v1/check", json=body(epoch=1))
            release = http.post("/v1/releases", json=body(epoch=1))
    return check, release


def test_a_policy_conflict_refusal_names_no_server_path(tmp_path: Path) -> None:
    ledger = str(tmp_path / "ledger.db")
    _, release = _two(ledger, tmp_path)
    assert release.status_code == 409
    assert release.json()["error"] == "policy_mismatch"
    assert str(tmp_path) not in release.text
    assert "the ledger already recorded policy" in release.json()["message"]


@pytest.mark.postgres
def test_a_policy_conflict_refusal_names_no_database_url(pg_url: str, tmp_path: Path) -> None:
    _, release = _two(pg_url, tmp_path)
    assert release.status_code == 409
    assert "postgresql://" not in release.text
    assert "127.0.0.1" not in release.text


def test_check_answers_a_policy_conflict_as_the_release_does(tmp_path: Path) -> None:
    check, release = _two(str(tmp_path / "ledger.db"), tmp_path)
    assert (check.status_code, check.json()["error"]) == (
        release.status_code,
        release.json()["error"],
    )
