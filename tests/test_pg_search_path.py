"""A PostgreSQL ledger or key store is written only in the session's own schema.

dpledger's tables are unqualified, so with ``search_path=team_b,team_a`` a session found
team_a's ledger (``ledger init`` adopted it, releases spent its budget) while a new one
would have been created in team_b. Now a writer gets a StoreError naming the schema; a
reader reads what its search_path finds; a URL whose search_path is the ledger's one schema
keeps working (review 39 led, confirmed here).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from factories import SPATIAL

import dpledger as dl
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
