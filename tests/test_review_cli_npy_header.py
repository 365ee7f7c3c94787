"""An ``.npy`` aggregate whose header numpy cannot parse is bad input (exit 2), never an
internal error (exit 3): the header is untrusted text, and numpy's parser raises more
than ``ValueError`` on it (``TokenError``, ``TypeError``, ``OverflowError``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import SPATIAL, npy_with_header

from dpledger.cli.main import main

POLICY = str(SPATIAL)


HEADERS = {
    "unclosed tuple": "{'descr': '<f8', 'fortran_order': False, 'shape': (1,, }",
    "unterminated string": "{'descr': '<f8', 'fortran_order': False, 'shape': (), 'a': '''",
    "boolean dimension": "{'descr': '<f8', 'fortran_order': False, 'shape': (True,), }",
    "huge dimension": "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 1" + "0" * 31 + "), }",
}


@pytest.mark.parametrize("name", sorted(HEADERS))
def test_a_malformed_npy_header_is_bad_input(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agg = tmp_path / "sum.npy"
    agg.write_bytes(npy_with_header(HEADERS[name]))
    ledger = tmp_path / "l.db"
    assert main(["ledger", "init", "--policy", POLICY, "--ledger", str(ledger)]) == 0
    before = ledger.read_bytes()
    capsys.readouterr()
    code = main(["check", "--policy", POLICY, "--ledger", str(ledger), "--epoch", "0",
                 "--metric", "clipped_mean_loss", "--region", "eu-west", "--cohort", "2000",
                 "--aggregate", str(agg)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert "internal error" not in err
    assert f"cannot read aggregate {agg}" in err
    assert ledger.read_bytes() == before
