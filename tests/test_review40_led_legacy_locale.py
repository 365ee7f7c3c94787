"""Standard output in an encoding without ε (review 40).

Under a locale that is not UTF-8 (``de_DE.ISO-8859-1``; cp1252 when Windows output is
redirected to a file; ``PYTHONIOENCODING=ascii``) Python's standard output refuses
characters it cannot encode. ``ledger show`` and ``ledger lifetime`` (ε, ρ, δ, "…")
then printed nothing and exited 1 ("the result could not be written"), and a release
printed "committed … but the result could not be written" instead of its value. Such a
character is now written as its ``\\u`` escape: the result is delivered.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger.cli.main import main


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "cp1252"])
def test_results_are_delivered_in_an_encoding_without_epsilon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoding: str
) -> None:
    agg = tmp_path / "agg.json"
    agg.write_text("1000.0")
    at = ["--policy", str(SPATIAL), "--ledger", str(tmp_path / "L.db")]
    release = ["release", *at, "--epoch", "0", "--metric", "clipped_mean_loss"]
    release += ["--region", "na", "--cohort", "3000", "--aggregate", str(agg)]
    for argv in (release, ["ledger", "show", *at], ["ledger", "lifetime", *at]):
        raw = io.BytesIO()
        out = io.TextIOWrapper(raw, encoding=encoding, write_through=True)
        monkeypatch.setattr("sys.stdout", out)
        assert main(argv) == 0, argv
        text = raw.getvalue().decode(encoding)
        assert "\\u03b5" in text or "epsilon" in text, text
        assert argv is not release or "  value     0." in text  # the value ε was spent on
