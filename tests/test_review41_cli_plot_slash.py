"""``calibrate --plot charts/``: a trailing slash names a directory (review 41).

``Path("charts/")`` is ``charts``: the chart was written as a file named ``charts`` (a PNG
without its suffix) where the user meant a directory. A new-file target ending in a slash
is refused (exit 2), nothing created, as ``--ledger dir/`` and ``ledger export --out
dir/`` are.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpledger._files import check_new
from dpledger.cli.main import main
from dpledger.errors import InvalidInput


def test_check_new_refuses_a_trailing_slash(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="names a directory"):
        check_new(f"{tmp_path}/charts/", "--plot")
    assert check_new(tmp_path / "chart.png", "--plot") == tmp_path / "chart.png"


@pytest.mark.parametrize("tail", ["/", "/.", "/.."])  # "." and "..": review 41 diff
def test_calibrate_plot_naming_a_directory_writes_nothing(tmp_path: Path, tail: str) -> None:
    pytest.importorskip("matplotlib")
    held = tmp_path / "held.npy"
    np.save(held, np.random.default_rng(0).uniform(0, 3, 500))
    before = sorted(p.name for p in tmp_path.iterdir())
    argv = ["calibrate", "--held-out", str(held), "--epsilon", "1", "--cohort", "2000"]
    assert main([*argv, "--plot", f"{tmp_path}/charts{tail}"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == before
