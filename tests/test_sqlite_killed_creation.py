"""A creator killed (SIGKILL) while it links a new SQLite ledger into place leaves nothing
that blocks the ledger: the next open for writing removes its temporary file, a read
removes nothing and names it, and a temporary that may not be dead is never touched.

The creator is a real child process that kills itself at ``os.link``: just before it
(the temporary is left) or just after it (the temporary is the ledger's second name).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _killed import killed_creator, temps_not_ours_to_remove
from factories import SPATIAL

import dpledger as dl

CREATION = """
import dpledger as dl
dl.Ledger.open(path, dl.Policy.load(extra[0]), mode="create").init()
"""


def _killed_creator(path: Path, point: str) -> list[Path]:
    return [killed_creator(path, point, CREATION, str(SPATIAL))]


def test_a_creator_killed_before_the_link_leaves_a_temporary_the_next_creation_removes(
    tmp_path: Path,
) -> None:
    p = tmp_path / "l.db"
    (left,) = _killed_creator(p, "before")
    assert not p.exists()
    with dl.Ledger.open(p, dl.Policy.load(SPATIAL), mode="create") as ledger:
        ledger.init()
    assert not left.exists()
    assert sorted(x.name for x in tmp_path.iterdir() if "creating" in x.name) == []


def test_a_creator_killed_after_the_link_leaves_a_second_name_a_write_removes(
    tmp_path: Path,
) -> None:
    p = tmp_path / "l.db"
    (left,) = _killed_creator(p, "after")
    assert p.stat().st_nlink == 2
    assert left.samefile(p)
    with dl.Ledger.open(p, dl.Policy.load(SPATIAL)) as ledger:  # mode "write"
        assert ledger.verify().ok
    assert not left.exists()
    assert p.stat().st_nlink == 1


def test_a_read_of_a_second_name_left_by_a_killed_creator_removes_nothing_and_names_it(
    tmp_path: Path,
) -> None:
    p = tmp_path / "l.db"
    (left,) = _killed_creator(p, "after")
    with pytest.raises(dl.StoreError, match=r"killed .*opening the ledger for writing removes"):
        dl.Ledger.open(p, dl.Policy.load(SPATIAL), mode="read")
    assert left.exists()
    assert p.stat().st_nlink == 2


def test_a_temporary_whose_creator_may_be_running_or_elsewhere_is_never_removed(
    tmp_path: Path,
) -> None:
    p = tmp_path / "l.db"
    with dl.Ledger.open(p, dl.Policy.load(SPATIAL), mode="create") as ledger:
        ledger.init()
    alive, init, elsewhere = temps_not_ours_to_remove(p)
    for t in (alive, init, elsewhere):
        t.write_bytes(b"")
    os.link(p, tmp_path / f".{p.name}.123.abcd1234.creating")  # an older dpledger's form
    with pytest.raises(dl.StoreError, match="interrupted creation"):
        dl.Ledger.open(p, dl.Policy.load(SPATIAL), mode="create")
    assert all(t.exists() for t in (alive, init, elsewhere))
