"""A real ``dpledger serve`` (uvicorn, its own process) on 127.0.0.1 over a real PostgreSQL:
8 concurrent clients race for the last 10% of a budget.

No overspend (the budget ends exactly full), every refusal a typed 409, nothing lost
(every 201 is an entry with its principal, every entry answered a 201), retries charge
nothing, and the ledger verifies.
"""

from __future__ import annotations

import threading
from collections import Counter
from fractions import Fraction
from pathlib import Path

import httpx2
import pytest
from _service import Served, body, make_site

from dpledger.approval import ReleaseRequest
from dpledger.ledger import Ledger
from dpledger.service.store import ServiceStore, default_location

CLIENTS = 8
ATTEMPTS = 5  # per client: 40 attempts for the 10 releases the budget has left


@pytest.mark.postgres
@pytest.mark.slow
def test_eight_clients_racing_for_the_last_tenth_never_overspend(
    pg_url: str, tmp_path: Path
) -> None:
    site = make_site(pg_url, tmp_path, scalar_eps="0.01")  # ε 0.01 a release, ε_eval = 1
    with Ledger.open(pg_url, site.policy) as ledger:
        setup = [(ReleaseRequest(epoch=0, metric="loss", region="north", cohort=1000), 800.0)] * 90
        ledger.release_round(setup, principal="setup")
        assert ledger.remaining(0, "north").amount == Fraction(1, 10)

    results: dict[str, httpx2.Response] = {}
    barrier = threading.Barrier(CLIENTS)

    def client(c: int, url: str) -> None:
        with httpx2.Client(base_url=url, headers=site.auth("north"), timeout=60) as http:
            barrier.wait()
            for a in range(ATTEMPTS):
                rid = f"client-{c}/attempt-{a}"
                results[rid] = http.post(
                    "/v1/releases", json=body(), headers={"Idempotency-Key": rid}
                )

    with Served(site, "--connections", "4", log=tmp_path / "serve.log") as server:
        threads = [threading.Thread(target=client, args=(c, server.url)) for c in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
        won = {rid: r.json() for rid, r in results.items() if r.status_code == 201}
        with httpx2.Client(base_url=server.url, headers=site.auth("north")) as http:
            retries = {
                rid: http.post("/v1/releases", json=body(), headers={"Idempotency-Key": rid})
                for rid in won
            }

    assert len(results) == CLIENTS * ATTEMPTS
    assert Counter(r.status_code for r in results.values()) == {201: 10, 409: 30}
    for r in results.values():
        if r.status_code == 409:
            assert r.json()["error"] == "budget_exceeded"
            assert r.json()["failed_checks"] == ["budget"]
    for rid, r in retries.items():  # the recorded release, saying this call charged nothing
        assert r.status_code == 201
        assert r.json() == {**won[rid], "retried": True}

    with Ledger.open(pg_url, site.policy, mode="read") as ledger:
        assert ledger.spent(0, "north").amount == 1  # exactly full: no overspend
        entries = {e.entry_id: e for e in ledger.entries(after=90)}
        assert len(ledger) == 100
        assert sorted(entries) == sorted(w["entry_id"] for w in won.values())
        for rid, w in won.items():
            e = entries[w["entry_id"]]
            assert (e.hash, e.draft.release_id) == (w["entry_hash"], rid)
            assert e.draft.principal == site.principals["north"]
        assert ledger.verify().ok
    with ServiceStore.open(default_location(pg_url)) as store:
        logged = store.refusals(limit=100)
    assert len(logged) == 30
    assert {r.failed for r in logged} == {("budget",)}
