"""``demo --plots DIR`` with a directory name too long for the file system passed the
checks made "before anything is spent" (``os.path.lexists`` reads the error as "absent"),
so the demo spent its budget and then failed to write the charts (exit 1). The name is
refused up front (exit 2) and no ledger is created."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpledger.cli.main import main

pytest.importorskip("matplotlib")


def test_a_plots_directory_name_past_the_limit_is_refused_before_any_spend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "demo.db"
    plots = tmp_path / ("p" * 300)
    capsys.readouterr()
    code = main(["demo", "--clients", "2000", "--quiet", "--ledger", str(ledger),
                 "--plots", str(plots)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--plots" in err
    assert not ledger.exists()
