"""``demo --fresh --ledger LINK``, where LINK is a symbolic link to the demo's own ledger:
the path check resolved the link (so the label's path matched) and then unlinked LINK
itself, deleting the user's symlink (a file the demo did not create) and putting a new
ledger in its place, while the old demo ledger stayed. A link is refused; the demo
replaces only the file it made, named by the path it made it at."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dpledger import InvalidInput, Ledger, Policy
from dpledger.sim.demo import DEFAULT_POLICY
from dpledger.sim.demo_ledger import claim_ledger, demo_labels


def test_fresh_through_a_symlink_deletes_neither_the_link_nor_the_ledger(
    tmp_path: Path,
) -> None:
    made = tmp_path / "d.db"
    with Ledger.open(made, Policy.load(DEFAULT_POLICY), mode="create",
                     labels=demo_labels(made)) as ledger:  # fmt: skip
        ledger.init()
    before = made.read_bytes()
    link = tmp_path / "link.db"
    link.symlink_to(made)
    with pytest.raises(InvalidInput, match="symbolic link"):
        claim_ledger(link, fresh=True)
    assert link.is_symlink()
    assert os.readlink(link) == str(made)
    assert made.read_bytes() == before
    claim_ledger(made, fresh=True)  # its own file, by its own path: freed
    assert not made.exists()
