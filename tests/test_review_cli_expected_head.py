"""``ledger verify --expected-head``: the anchor's hash is a SHA-256 in hex. The correct
head written in upper case (as some tools print hex) is that head, not a tampered chain;
64 characters that are not hex are a malformed anchor (exit 2, as the service's 422),
never a failed verification (exit 1) of a sound ledger."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger import Ledger, Policy, ReleaseRequest
from dpledger.cli.main import main

POLICY = str(SPATIAL)


def _ledger(tmp_path: Path) -> tuple[str, tuple[int, str]]:
    path = str(tmp_path / "l.db")
    with Ledger.open(path, Policy.load(POLICY), mode="create") as ledger:
        request = ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="na", cohort=2400)
        ledger.release(request, 1234.5)
        return path, ledger.head()


def test_the_true_head_in_upper_case_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, (seq, digest) = _ledger(tmp_path)
    argv = ["ledger", "verify", "--policy", POLICY, "--ledger", path, "--expected-head"]
    assert main([*argv, f"{seq}:{digest}"]) == 0
    assert main([*argv, f"{seq}:{digest.upper()}"]) == 0, capsys.readouterr().out


@pytest.mark.parametrize("digest", ["z" * 64, "é" * 64, "0x" + "0" * 62])
def test_an_anchor_that_is_not_hex_is_bad_input(
    digest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, (seq, _) = _ledger(tmp_path)
    argv = ["ledger", "verify", "--policy", POLICY, "--ledger", path, "--expected-head"]
    assert main([*argv, f"{seq}:{digest}"]) == 2
    assert "--expected-head takes ENTRY_ID:HASH" in capsys.readouterr().err


def test_the_python_api_reads_hex_in_either_case_and_refuses_non_hex(tmp_path: Path) -> None:
    """``Ledger.verify(expected_head=...)``: the CLI's rule (review hcli), in the API too."""
    from factories import SPATIAL

    import dpledger as dl

    with dl.Ledger.open(tmp_path / "api.db", dl.Policy.load(SPATIAL), mode="create") as ledger:
        ledger.init()
        seq, digest = ledger.head()
        assert ledger.verify(expected_head=(seq, digest.upper())).ok
        for bad in ("Z" * 64, digest[:63], digest + "0"):
            with pytest.raises(dl.InvalidInput, match="64-hex entry_hash"):
                ledger.verify(expected_head=(seq, bad))
