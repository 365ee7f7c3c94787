"""A ``keys create`` killed (SIGKILL) while it links a new key store into place leaves
nothing behind for good: the next open that may write (create, or the service's write
open) removes its temporary file, a read-only open removes nothing and names it, and a
temporary that may not be dead, or is not of our own form, is never touched.

The creator is a real child process that kills itself at ``os.link``: just before it
(the temporary is left) or just after it (the temporary is the store's second name).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _killed import killed_creator, temps_not_ours_to_remove

from dpledger.errors import LedgerNotFound, StoreError
from dpledger.service.keys import Scopes
from dpledger.service.store import ServiceStore

CREATION = """
from dpledger.service.store import ServiceStore
ServiceStore.open(path, create=True)
"""


def _killed_creator(path: Path, point: str) -> Path:
    return killed_creator(path, point, CREATION)


def _temps(where: Path) -> list[str]:
    return sorted(x.name for x in where.iterdir() if "creating" in x.name)


def test_a_creator_killed_before_the_link_leaves_a_temporary_the_next_creation_removes(
    tmp_path: Path,
) -> None:
    p = tmp_path / "L.keys.db"
    left = _killed_creator(p, "before")
    assert not p.exists()
    with pytest.raises(LedgerNotFound, match="dpledger keys create"):  # a read: nothing made
        ServiceStore.open(str(p), read_only=True)
    assert left.exists()
    with ServiceStore.open(str(p), create=True) as store:
        store.create_key("maps", Scopes(("read",)))
    assert _temps(tmp_path) == []
    assert sorted(x.name for x in tmp_path.iterdir()) == ["L.keys.db"]


def test_a_creator_killed_after_the_link_leaves_a_second_name_a_write_open_removes(
    tmp_path: Path,
) -> None:
    p = tmp_path / "L.keys.db"
    left = _killed_creator(p, "after")
    assert p.stat().st_nlink == 2
    assert left.samefile(p)
    with ServiceStore.open(str(p)) as store:  # what the service does: no create, may write
        store.create_key("maps", Scopes(("read",)))
    assert not left.exists()
    assert p.stat().st_nlink == 1
    assert _temps(tmp_path) == []


def test_a_read_only_open_of_a_second_name_removes_nothing_and_names_it(
    tmp_path: Path,
) -> None:
    p = tmp_path / "L.keys.db"
    left = _killed_creator(p, "after")
    with pytest.raises(StoreError, match=r"killed .*opening the key store for writing removes"):
        ServiceStore.open(str(p), read_only=True)
    assert left.exists()
    assert p.stat().st_nlink == 2


def test_a_temporary_whose_creator_may_be_running_or_elsewhere_is_never_removed(
    tmp_path: Path,
) -> None:
    p = tmp_path / "L.keys.db"
    ServiceStore.open(str(p), create=True).close()
    alive, init, elsewhere = temps_not_ours_to_remove(p)
    older = tmp_path / f".{p.name}.999999999.abcd1234.creating"  # the old, hostless form
    for t in (alive, init, elsewhere, older):
        t.write_bytes(b"")
    for create in (True, False):
        ServiceStore.open(str(p), create=create).close()
    assert all(t.exists() for t in (alive, init, elsewhere, older))
    older.unlink()
    os.link(p, older)  # a second name of the old form: refused and named, never removed
    with pytest.raises(StoreError, match="interrupted creation"):
        ServiceStore.open(str(p), create=True)
    assert older.exists()
    assert p.stat().st_nlink == 2
