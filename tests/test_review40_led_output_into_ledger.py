"""A command whose standard output or error is redirected into its own ledger (review 40).

``dpledger ledger show --ledger L.db >> L.db`` (or ``export``, ``verify``, or a release's
result, or ``2>> L.db``) appended its text to the ledger file: a read changed the ledger
(SQLite ignores bytes past its page count, so it still verified, but the file was no
longer the one written). Such a redirection is refused before anything is opened
(exit 2), and the stream is silenced first, so not even the refusal lands in the file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from factories import SPATIAL

REPO = Path(__file__).resolve().parents[1]


def _run(argv: list[str], **streams: object) -> int:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "dpledger.cli", *argv]
    return subprocess.run(cmd, env=env, check=False, timeout=120, **streams).returncode  # type: ignore[call-overload, no-any-return]


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_output_redirected_into_the_ledger_is_refused_untouched(
    tmp_path: Path, stream: str, suffix: str
) -> None:
    ledger = tmp_path / "L.db"
    agg = tmp_path / "agg.json"
    agg.write_text("1000.0")
    at = ["--policy", str(SPATIAL), "--ledger", str(ledger)]
    release = ["release", *at, "--epoch", "0", "--metric", "clipped_mean_loss"]
    release += ["--region", "na", "--cohort", "3000", "--aggregate", str(agg)]
    assert _run(release, capture_output=True) == 0
    target = Path(f"{ledger}{suffix}")
    target.touch()  # an empty -wal is SQLite's own between writes
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for argv in (["ledger", "show", *at], ["ledger", "export", *at, "--json"], release):
        with target.open("ab") as into:
            assert _run(argv, **{stream: into}) == 2, argv
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before, argv
