"""Helpers of the service tests: a ledger with keys, in-process ASGI calls, a real server.

:func:`make_site` creates a ledger (SQLite path or PostgreSQL URL) under the small test
policy and a key store beside it holding one key per role. :func:`call` sends one request
through httpx's ASGI transport (no socket). :class:`Served` runs ``dpledger serve`` as a
real process on 127.0.0.1 and a free port, and stops it by its pid.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from factories import policy_text

from dpledger.ledger import Ledger
from dpledger.policy import Policy
from dpledger.service.keys import ACTIONS, Scopes
from dpledger.service.state import Settings
from dpledger.service.store import ServiceStore, default_location
from dpledger.service.testing import ServedProcess

ROLES: dict[str, Scopes] = {
    "admin": Scopes(ACTIONS),
    "north": Scopes(("check", "release", "read"), regions=("north",), metrics=("loss",)),
    "reader": Scopes(("read",)),
    "auditor": Scopes(("verify",)),
    "revoked": Scopes(ACTIONS),
}
"""The keys every test site has: all actions; north's loss only; read; verify; revoked."""


@dataclass
class Site:
    """A ledger, its policy file and a key store with one key per role of :data:`ROLES`."""

    ledger: str
    policy_path: Path
    policy: Policy
    keys: dict[str, str] = field(default_factory=dict)  # role -> key text
    principals: dict[str, str] = field(default_factory=dict)  # role -> name/key id

    def settings(self, **kw: Any) -> Settings:
        return Settings(ledger=self.ledger, policy=self.policy, **kw)

    def auth(self, role: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[role]}"}


def make_site(ledger: str, directory: Path, *, scalar_eps: str = "0.1") -> Site:
    """A new ledger at ``ledger`` (created now, empty) and its keys."""
    text = policy_text(scalar_eps=scalar_eps)
    path = directory / "policy.toml"
    path.write_text(text)
    policy = Policy.from_toml(text, source=str(path))
    with Ledger.open(ledger, policy, mode="create") as created:
        created.init()
    site = Site(ledger, path, policy)
    with ServiceStore.open(default_location(ledger), create=True) as store:
        for role, scopes in ROLES.items():
            made, record = store.create_key(role, scopes)
            site.keys[role] = made.token
            site.principals[role] = record.principal
        store.revoke(site.principals["revoked"].split("/")[1])
    return site


def request(region: str = "north", *, epoch: int = 0, metric: str = "loss") -> dict[str, Any]:
    """A release request body's ``request`` for the test policy's scalar metric."""
    return {"epoch": epoch, "metric": metric, "region": region, "cohort": 1000}


def body(region: str = "north", aggregate: Any = 800.0, **kw: Any) -> dict[str, Any]:
    """A release body: a scalar sum inside the clip bounds of 1,000 clients."""
    return {"request": request(region, **kw), "aggregate": aggregate}


def call(app: Any, method: str, url: str, **kw: Any) -> httpx2.Response:
    """One request through httpx's ASGI transport (the app in this process, no socket)."""

    async def go() -> httpx2.Response:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://testserver") as c:
            return await c.request(method, url, **kw)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(go())
    # a loop already runs in this thread (the session's Playwright browser): use another
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, go()).result()


def snapshot(ledger: str) -> object:
    """Everything the ledger holds, to compare before and after a refused request.

    SQLite: the database file's bytes and its WAL's (if any). PostgreSQL: every row of
    the ledger's four tables, in key order.
    """
    if not ledger.startswith("postgresql://"):
        files = [Path(ledger), Path(ledger + "-wal")]
        return [f.read_bytes() if f.exists() else None for f in files]
    import psycopg

    tables = {
        "dpl_entries": "seq",
        "dpl_spend": "epoch, scope, metric",
        "dpl_meta": "key",
        "dpl_policies": "hash",
    }
    with psycopg.connect(ledger, autocommit=True) as conn:
        return {
            t: conn.execute(f"SELECT * FROM {t} ORDER BY {order}").fetchall()
            for t, order in tables.items()
        }


class Served(ServedProcess):
    """``dpledger serve`` for ``site`` in its own process (see :class:`ServedProcess`)."""

    def __init__(self, site: Site, *extra: str, log: Path) -> None:
        super().__init__(site.ledger, site.policy_path, "--log-level", "warning", *extra, log=log)
        self.site = site
