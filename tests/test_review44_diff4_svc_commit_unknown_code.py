"""The service answered a COMMIT of unknown outcome exactly as a busy database: 503,
``store_unavailable``, "the request may not have completed". bd7edd7 says CommitUnknown's
code is ``commit_unknown`` in JSON errors (the CLI's ``--json`` has it), but the service
replaced it with ``store_unavailable``, so a client could not tell "nothing was charged"
from "ε may have been spent: fetch it under the same Idempotency-Key" (review 44 diff 4).
"""

from __future__ import annotations

from typing import Any

import pytest
from _service import Site, body, call

from dpledger.errors import StoreError
from dpledger.ledger.sqlite import SqliteStore


def test_a_lost_commit_is_commit_unknown_and_its_retry_returns_the_release(
    app: Any, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = SqliteStore._execute
    lost: list[str] = []

    def answer_lost(self: SqliteStore, sql: str, *args: Any) -> Any:
        out = real(self, sql, *args)
        if sql == "COMMIT" and not lost:  # it lands; its answer is lost
            lost.append(sql)
            raise StoreError(f"SQLite ledger {self.location}: disk I/O error")
        return out

    monkeypatch.setattr(SqliteStore, "_execute", answer_lost)
    headers = {**site.auth("north"), "Idempotency-Key": "k-1"}
    r = call(app, "POST", "/v1/releases", json=body(), headers=headers)
    assert lost == ["COMMIT"]
    assert (r.status_code, r.headers["retry-after"]) == (503, "1")
    assert r.json()["error"] == "commit_unknown", r.text
    assert "may have been recorded, its ε spent" in r.json()["message"]  # not "busy"
    assert "value" not in r.json()
    again = call(app, "POST", "/v1/releases", json=body(), headers=headers)
    assert again.status_code in (200, 201), again.text  # the recorded release, charged once
