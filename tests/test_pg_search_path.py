"""A PostgreSQL ledger or key store is written only in the session's own schema.

dpledger's tables are unqualified, so with ``search_path=team_b,team_a`` a session found
team_a's ledger (``ledger init`` adopted it, releases spent its budget) while a new one
would have been created in team_b. Now a writer gets a StoreError naming the schema; a
reader reads what its search_path finds; a URL whose search_path is the ledger's one schema
keeps working (review 39 led, confirmed here).
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger.cli.main import main
from dpledger.errors import StoreError
from dpledger.service.store import ServiceStore

pytestmark = pytest.mark.postgres


def _schema(url: str) -> str:
    found = re.search(r"search_path%3D([^&]+)", url)
    assert found is not None
    return found.group(1)


@pytest.fixture
def two(pg_server: Any) -> Iterator[tuple[str, str, str]]:
    """team_a's URL (a ledger and key store in it), team_b's own, and team_b's with
    team_a's schema second in its search_path."""
    a, b = pg_server.create_schema(), pg_server.create_schema()
    policy = dl.Policy.load(str(SPATIAL))
    with dl.Ledger.open(a, policy, mode="create") as ledger:
        ledger.init()
    with ServiceStore.open(a, create=True):
        pass
    yield a, b, b.replace(_schema(b), f"{_schema(b)},{_schema(a)}")
    pg_server.drop(a)
    pg_server.drop(b)


def test_a_reader_reads_the_ledger_its_search_path_finds(two: tuple[str, str, str]) -> None:
    a, _, both = two
    policy = dl.Policy.load(str(SPATIAL))
    with dl.Ledger.open(a, policy, mode="write") as ledger:
        ledger.release(dl.ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="na",
                                          cohort=5_000), 1_000.0)  # fmt: skip
    with dl.Ledger.open(both, policy, mode="read") as ledger:  # as any PostgreSQL client
        assert len(ledger) == 1


@pytest.mark.parametrize("mode", ["write", "create"])
def test_a_ledger_further_down_the_search_path_is_refused_to_a_writer(
    two: tuple[str, str, str], mode: Any
) -> None:
    a, b, both = two
    policy = dl.Policy.load(str(SPATIAL))
    with pytest.raises(StoreError, match=rf"found in schema '{_schema(a)}'.*search_path") as e:
        dl.Ledger.open(both, policy, mode=mode)
    assert f"its own schema is '{_schema(b)}'" in str(e.value)
    with dl.Ledger.open(a, policy, mode="read") as ledger:  # its own URL still reads it
        assert ledger.exists
        assert len(ledger) == 0
    with dl.Ledger.open(b, policy, mode="create") as ledger:  # team_b gets its own
        assert not ledger.exists
        ledger.init()
        assert ledger.exists
    with dl.Ledger.open(both, policy, mode="read") as ledger:  # now found in its own schema
        assert ledger.exists


def test_a_key_store_further_down_the_search_path_is_refused(two: tuple[str, str, str]) -> None:
    a, _, both = two
    with pytest.raises(StoreError, match=rf"key store .*found in schema '{_schema(a)}'"):
        ServiceStore.open(both, create=True)
    with ServiceStore.open(a) as store:
        assert store.list_keys() == []


@contextlib.contextmanager
def role_with_own_schema(pg_server: Any, url: str, grant: str) -> Iterator[str]:
    """A login role with a schema of its own name (PostgreSQL's per-user pattern: its
    default search_path "$user", public makes that schema its own), granted ``grant`` on
    ``public``'s tables: its URL; dropped afterwards."""
    role = f"r_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'CREATE SCHEMA "{role}" AUTHORIZATION "{role}"')
        conn.execute(f'GRANT {grant} ON ALL TABLES IN SCHEMA public TO "{role}"')
    try:
        yield url.replace(f"//{pg_server.user}@", f"//{role}@")
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{role}" CASCADE')
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


def _public_ledger(pg_server: Any) -> str:
    """A new database (default search_path) whose ledger the admin made in ``public``."""
    url = pg_server.create_database()
    with dl.Ledger.open(url, dl.Policy.load(str(SPATIAL)), mode="create") as ledger:
        ledger.init()  # the admin role has no schema of its name: made in public
    return str(url)


def test_a_public_ledger_reads_for_a_role_with_its_own_schema(pg_server: Any) -> None:
    """Review 39 (diff): the first rule refused every open outside current_schema(), so an
    auditor role in PostgreSQL's per-user pattern could not even verify a ledger in
    ``public``. A reader reads what its search_path finds; a writer must still name the
    ledger's schema (its refusal says how)."""
    policy = dl.Policy.load(str(SPATIAL))
    with role_with_own_schema(pg_server, _public_ledger(pg_server), "SELECT") as mine:
        with dl.Ledger.open(mine, policy, mode="read") as ledger:
            assert ledger.exists
            assert len(ledger) == 0
        with pytest.raises(dl.StoreError, match=r"found in schema 'public'.*search_path"):
            dl.Ledger.open(mine, policy, mode="write")


def test_check_agrees_with_release_on_a_foreign_schema(
    pg_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review 39 (diff2): ``check``, opened to read, approved (as a reader) a release that
    ``release`` refused (as a writer), against another schema's spend. A dry run now
    decides as the release would (``SqlStore.check_as_writer``)."""
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"epoch": 0, "metric": "clipped_mean_loss",
                               "region": "eu-west", "cohort": 2400}))  # fmt: skip
    agg = tmp_path / "agg.json"
    agg.write_text("1200.0")
    grant = "SELECT, INSERT, UPDATE"
    with role_with_own_schema(pg_server, _public_ledger(pg_server), grant) as mine:
        args = ["--policy", str(SPATIAL), "--ledger", mine, "--request", str(req),
                "--aggregate", str(agg)]  # fmt: skip
        assert main(["release", *args]) == 2  # the writer is refused: found in 'public'
        assert "public" in capsys.readouterr().err
        assert main(["check", *args]) == 2  # and so is its dry run
        assert "public" in capsys.readouterr().err
