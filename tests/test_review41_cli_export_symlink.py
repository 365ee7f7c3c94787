"""``ledger export --out`` naming a symbolic link, or a path with a trailing slash (review 41).

The output is written to a temporary beside ``--out`` and renamed over it. When ``--out``
was a symbolic link, the rename replaced the link itself with a regular file: the file the
user named through it was not written, and the link, which dpledger did not create, was
deleted. ``--out /dev/stdout --force`` with standard output redirected to a file (so
``/dev/stdout`` resolves to a regular file) deleted the system's ``/dev/stdout`` link
and left a regular file in ``/dev``. A dangling link was replaced even without
``--force``. And ``--out results/`` (a directory meant, none there) wrote a file named
``results``; with ``--force``, ``--out notes.txt/`` replaced ``notes.txt``. Both are
refused now (exit 2), and nothing is changed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger.cli.main import main


@pytest.fixture
def at(tmp_path: Path) -> list[str]:
    agg = tmp_path / "a.json"
    agg.write_text("1234.5")
    at = ["--policy", str(SPATIAL), "--ledger", str(tmp_path / "L.db")]
    release = ["release", *at, "--epoch", "0", "--metric", "clipped_mean_loss"]
    assert main([*release, "--region", "na", "--cohort", "2400", "--aggregate", str(agg)]) == 0
    return at


def _tree(d: Path) -> dict[str, tuple[str, bytes | str]]:
    out: dict[str, tuple[str, bytes | str]] = {}
    for p in d.iterdir():
        if p.is_symlink():
            out[p.name] = ("link", os.readlink(p))
        elif p.is_file():
            out[p.name] = ("file", p.read_bytes())
    return out


def test_a_symlink_to_a_file_is_not_replaced_by_a_file(tmp_path: Path, at: list[str]) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("keep")
    link = tmp_path / "out.jsonl"
    link.symlink_to(target)
    before = _tree(tmp_path)
    assert main(["ledger", "export", *at, "--out", str(link), "--force"]) == 2
    assert link.is_symlink()
    assert _tree(tmp_path) == before


def test_a_dangling_symlink_is_not_replaced(tmp_path: Path, at: list[str]) -> None:
    link = tmp_path / "out.jsonl"
    link.symlink_to(tmp_path / "nowhere.jsonl")
    before = _tree(tmp_path)
    assert main(["ledger", "export", *at, "--out", str(link)]) == 2  # no --force needed before
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("exists", [False, True])
def test_a_trailing_slash_names_a_directory(
    tmp_path: Path, at: list[str], exists: bool, force: bool
) -> None:
    named = tmp_path / "results"
    if exists:
        named.write_text("keep")
    before = _tree(tmp_path)
    argv = ["ledger", "export", *at, "--out", f"{named}/", *(["--force"] if force else [])]
    assert main(argv) == 2
    assert _tree(tmp_path) == before
