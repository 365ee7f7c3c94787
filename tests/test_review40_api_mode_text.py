"""``Ledger.open``'s mode is read by its text (review 40, suspected by the API review): a
``str`` subclass whose ``==`` says yes to everything was "read" to one check and "write"
to another (a write handle whose policy was validated by the relaxed rules for reading
old ledgers). A ``StrEnum`` member is its text; anything else is InvalidInput."""

from __future__ import annotations

import enum
from pathlib import Path

import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger.errors import InvalidInput


class Yes(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


class Mode(enum.StrEnum):
    CREATE = "create"


def test_a_mode_is_read_by_its_text(tmp_path: Path) -> None:
    policy = dl.Policy.load(str(SPATIAL))
    with pytest.raises(InvalidInput, match="mode must be"):
        dl.Ledger.open(tmp_path / "a.db", policy, mode=Yes("anything"))  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())
    with dl.Ledger.open(tmp_path / "c.db", policy, mode=Mode.CREATE) as ledger:  # type: ignore[arg-type]
        ledger.init()
        assert ledger.mode == "create"
    with dl.Ledger.open(tmp_path / "c.db", policy, mode=Yes("read")) as ledger:  # type: ignore[arg-type]
        assert ledger.mode == "read"
        assert type(ledger.mode) is str
    for bad in (None, 1, b"write", "Write"):
        with pytest.raises(InvalidInput, match="mode must be"):
            dl.Ledger.open(tmp_path / "d.db", policy, mode=bad)  # type: ignore[arg-type]
