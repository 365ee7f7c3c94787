"""Shared fixtures: one real PostgreSQL server per session, a fresh database per test,
``store``: each contract test once per store (SQLite, PostgreSQL; see ``_stores.py``), and
``chromium``: a real headless browser for the service's page, and ``site``/``app``: an
SQLite ledger with its key store and the service app over it (a module may override them).

The server is started by :mod:`pgserver` (initdb + pg_ctl on a temp directory, as the
unprivileged ``postgres`` user when running as root) the first time a test asks for
it, and stopped at the end of the session. When no PostgreSQL binary can be found the
PostgreSQL tests are skipped, and the terminal summary says so in a line that cannot
be missed: ``PostgreSQL tests SKIPPED: <reason>``.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest
from _stores import StoreUnderTest, closed_port
from hypothesis import settings

if TYPE_CHECKING:
    from pgserver import PgServer

# Flower reads these when flwr is first imported, whichever test module imports it first
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")

# Property tests draw the same examples on every run (a seed from each test's own
# code), so CI cannot fail by chance; HYPOTHESIS_PROFILE=explore draws new ones.
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_PG_SKIP_REASON = pytest.StashKey[str]()
_BROWSER_SKIP_REASON = pytest.StashKey[str]()
_skipped_pg_tests: list[str] = []
_skipped_ray_tests: list[str] = []

CHROMIUM = os.environ.get("DPLEDGER_CHROMIUM", "/usr/bin/chromium")
"""Debian's Chromium (``apt-get install chromium``; ``make test`` installs it)."""
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run",
]  # fmt: skip
"""As root on a closed network. Playwright's ``launch()`` adds a fresh ``--user-data-dir``
(a temporary profile it deletes on close) itself, and refuses one passed here."""


def _pgserver_module() -> ModuleType:
    # imported on demand: it needs psycopg, which the SQLite-only tests do not
    if __package__:
        from . import pgserver
    else:
        import pgserver
    return pgserver


@pytest.fixture(scope="session")
def pg_server(request: pytest.FixtureRequest) -> Iterator[PgServer]:
    """A running PostgreSQL server for the whole session (skips loudly if impossible)."""
    try:
        pgserver = _pgserver_module()
    except ImportError as e:
        reason = f"psycopg is not installed ({e}); run: pip install -e '.[postgres]'"
        request.config.stash[_PG_SKIP_REASON] = reason
        pytest.skip(f"PostgreSQL tests SKIPPED: {reason}")
    try:
        server = pgserver.start()
    except pgserver.PgUnavailable as e:
        request.config.stash[_PG_SKIP_REASON] = str(e)
        pytest.skip(f"PostgreSQL tests SKIPPED: {e}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def site(tmp_path: Path) -> Any:
    """An SQLite ledger under the small test policy and a key store holding one key per
    role (``_service.make_site``)."""
    from _service import make_site

    return make_site(str(tmp_path / "ledger.db"), tmp_path)


@pytest.fixture
def app(site: Any) -> Iterator[Any]:
    """The service app over ``site``, closed after the test."""
    from dpledger.service import create_app

    made = create_app(site.settings(connections=2))
    yield made
    made.state.service.close()


@pytest.fixture(scope="session")
def chromium(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Real headless Chromium driven by Playwright; skips LOUDLY if it cannot start.

    With ``DPLEDGER_REQUIRE_BROWSER=1`` a missing browser fails the test instead.
    """

    def unavailable(reason: str) -> None:
        if os.environ.get("DPLEDGER_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser tests cannot run: {reason}")
        request.config.stash[_BROWSER_SKIP_REASON] = reason
        pytest.skip(f"BROWSER TESTS SKIPPED: {reason}")

    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError as e:
        unavailable(f"playwright is not installed ({e}); run: pip install -e '.[dev]'")
    if not os.path.exists(CHROMIUM):
        unavailable(f"{CHROMIUM} is missing; run: apt-get install -y chromium (make test does)")
    with sync_playwright() as pw:
        try:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        except Error as e:
            unavailable(f"{CHROMIUM} does not start under Playwright: {str(e)[:300]}")
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A URL whose ``search_path`` is a fresh, empty schema; dropped afterwards."""
    url = pg_server.create_schema()
    yield url
    pg_server.drop(url)


@pytest.fixture
def pg_role(pg_url: str) -> Iterator[str]:
    """A new login role (superuser) on ``pg_url``'s server: its own ``search_path`` to set."""
    import psycopg

    name = f"r_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{name}" LOGIN SUPERUSER')
    yield name
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'DROP ROLE IF EXISTS "{name}"')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreUnderTest]:
    made: list[str] = []
    if request.param == "sqlite":
        s = StoreUnderTest(
            "sqlite",
            str(tmp_path / "ledger.db"),
            str(tmp_path / "no-such-dir" / "ledger.db"),
            sqlite3.Error,
            lambda: str(tmp_path / f"ledger-{uuid.uuid4().hex[:8]}.db"),
        )
    else:
        import psycopg

        server = request.getfixturevalue("pg_server")

        def fresh_schema() -> str:
            made.append(server.create_schema())
            return made[-1]

        s = StoreUnderTest(
            "postgres",
            request.getfixturevalue("pg_url"),
            f"postgresql://dpl:s3cret-pw@127.0.0.1:{closed_port()}/nowhere?connect_timeout=5",
            psycopg.Error,
            fresh_schema,
        )
    yield s
    s.close_all()
    for url in made:
        server.drop(url)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count PostgreSQL and Ray tests that were skipped, for the terminal summary."""
    if report.skipped and "postgres" in report.keywords:
        _skipped_pg_tests.append(report.nodeid)
    if report.skipped and "ray" in report.keywords:
        _skipped_ray_tests.append(report.nodeid)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """Make skipped PostgreSQL, browser and Ray tests impossible to miss in ``make test`` output."""
    browser = config.stash.get(_BROWSER_SKIP_REASON, None)
    if browser is not None:
        terminalreporter.write_sep("!", f"BROWSER TESTS SKIPPED: {browser}", red=True, bold=True)
    if _skipped_ray_tests:
        terminalreporter.write_sep(
            "!",
            f"Flower simulation-engine tests SKIPPED: Ray is not installed "
            f"(pip install 'flwr[simulation]') ({len(_skipped_ray_tests)} tests)",
            red=True,
            bold=True,
        )
    reason = config.stash.get(_PG_SKIP_REASON, None)
    if reason is None and not _skipped_pg_tests:
        return
    why = reason or "see the skip reasons above"
    terminalreporter.write_sep(
        "!",
        f"PostgreSQL tests SKIPPED: {why} ({len(_skipped_pg_tests)} tests)",
        red=True,
        bold=True,
    )
