"""``demo --plots DIR --fresh`` replaced any regular PNG file named like one of its charts
(``ratio_by_region.png``, ...), whoever made it: a user's own chart of that name was
deleted. Each demo chart now carries a mark (a PNG ``tEXt`` chunk naming the path the demo
wrote it at), and ``--fresh`` replaces only a marked chart at that path: a user's PNG, or
a demo chart copied from elsewhere, is refused as a copied demo ledger is."""

from __future__ import annotations

import shutil
import zlib
from pathlib import Path

import pytest

from dpledger.errors import InvalidInput
from dpledger.sim.plots import PLOT_NAMES, check_plot_targets

pytest.importorskip("matplotlib")


def _png(text: dict[str, str], *, after: bool = False) -> bytes:
    """A 1×1 grey PNG with ``text`` as tEXt chunks before its image data (or ``after``)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    ihdr = (1).to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0])
    texts = b"".join(chunk(b"tEXt", f"{k}\0{v}".encode()) for k, v in text.items())
    idat = chunk(b"IDAT", zlib.compress(b"\0\x80"))
    body = idat + texts if after else texts + idat
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + body + chunk(b"IEND", b"")


def test_fresh_never_replaces_a_png_the_demo_did_not_make(tmp_path: Path) -> None:
    mine = tmp_path / "ratio_by_region.png"
    mine.write_bytes(_png({"Software": "a user's own chart"}))
    with pytest.raises(InvalidInput, match="carries its mark"):
        check_plot_targets(tmp_path, replace=True)
    # a chart claiming to be the demo's, made for another path, is not this one's either
    mine.write_bytes(_png({"dpledger": "demo chart at '/elsewhere/ratio_by_region.png'"}))
    with pytest.raises(InvalidInput):
        check_plot_targets(tmp_path, replace=True)
    # the right mark, but after the image data: only the chunks before it are read
    mark = {"dpledger": f"demo chart at {str(mine)!a}"}
    mine.write_bytes(_png(mark, after=True))
    with pytest.raises(InvalidInput):
        check_plot_targets(tmp_path, replace=True)
    mine.write_bytes(_png(mark))  # before it: the demo's own chart
    assert check_plot_targets(tmp_path, replace=True)[0] == mine


def test_the_demo_replaces_its_own_charts_and_not_a_copy_of_them(tmp_path: Path) -> None:
    from dpledger.cli.main import main

    made, copy = tmp_path / "made", tmp_path / "copy"
    ledger = tmp_path / "d.db"
    args = ["demo", "--ledger", str(ledger), "--plots", str(made), "--quiet"]
    assert main(args) == 0
    assert main([*args, "--fresh"]) == 0  # its own charts, at the paths it wrote them
    shutil.copytree(made, copy)
    before = {n: (copy / n).read_bytes() for n in PLOT_NAMES}
    kept = ledger.read_bytes()
    again = ["demo", "--ledger", str(ledger), "--plots", str(copy), "--quiet", "--fresh"]
    assert main(again) == 2  # copies: the user's files now
    assert {n: (copy / n).read_bytes() for n in PLOT_NAMES} == before
    assert ledger.read_bytes() == kept  # refused before any work


def test_a_fifo_or_link_under_a_charts_name_is_refused_without_blocking(tmp_path: Path) -> None:
    """The mark is read through a descriptor that never follows a link nor waits on a FIFO
    (a chart swapped for a FIFO between the check and the read hung ``--fresh``)."""
    import os

    from dpledger.sim.plots import _is_chart

    fifo = tmp_path / "ratio_by_region.png"
    os.mkfifo(fifo)
    assert not _is_chart(fifo)  # returns at once: nobody writes the FIFO
    fifo.unlink()
    real = tmp_path / "elsewhere.png"
    real.write_bytes(_png({"dpledger": f"demo chart at {str(fifo)!a}"}))
    fifo.symlink_to(real)
    assert not _is_chart(fifo)
