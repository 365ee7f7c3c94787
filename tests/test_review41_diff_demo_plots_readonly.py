"""``dpledger demo --plots DIR`` where DIR cannot be written (review 41, diff review).

Review 41 named a read-only file system when a ledger or key store is created there,
before anything is done. ``demo --plots`` checks its chart names "before anything is
spent" but not that the directory can take files: on a read-only mount the demo ran,
committed its releases, and only then failed ("the charts were not written: OSError:
[Errno 30] Read-only file system", exit 1). Now it is refused up front (exit 2, no ledger
created), naming the read-only file system.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from dpledger import _creating
from dpledger.cli.main import main


def test_plots_on_a_read_only_fs_is_refused_before_the_demo_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    charts = tmp_path / "charts"
    real = os.statvfs

    def statvfs(p: str | os.PathLike[str]) -> object:  # tmp_path mounted read-only
        st = real(p)
        ro = Path(p).resolve() == tmp_path.resolve()
        return SimpleNamespace(f_flag=st.f_flag | (os.ST_RDONLY if ro else 0))

    monkeypatch.setattr(_creating.os, "statvfs", statvfs)
    ledger = tmp_path / "other" / "d.db"
    ledger.parent.mkdir()
    argv = ["demo", "--quiet", "--clients", "2000", "--ledger", str(ledger)]
    assert main([*argv, "--plots", str(charts)]) == 2
    assert "read-only file system" in capsys.readouterr().err
    assert not ledger.exists()  # nothing was spent
    assert not charts.exists()
