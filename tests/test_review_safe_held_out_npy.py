"""A held-out ``.npy`` is untrusted bytes: its header is checked before numpy allocates.

``load_held_out`` hands the bytes to ``np.load``, which allocates what the header
claims: 128 bytes claiming 2**40 float64 values raise MemoryError (``calibrate`` exit 3,
"a dpledger bug"), and a malformed header raises more than ValueError. The aggregate
reader checked the header first; the held-out reader did not (both use dpledger._npy now).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import npy_with_header

from dpledger.cli.main import main
from dpledger.errors import InvalidInput
from dpledger.planning.clip import load_held_out

HEADERS = {
    "huge shape": "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }",
    "unclosed tuple": "{'descr': '<f8', 'fortran_order': False, 'shape': (1,, }",
    "boolean dimension": "{'descr': '<f8', 'fortran_order': False, 'shape': (True,), }",
}


@pytest.mark.parametrize("header", list(HEADERS.values()), ids=list(HEADERS))
def test_a_held_out_npy_header_is_bad_input(header: str, tmp_path: Path) -> None:
    path = tmp_path / "held.npy"
    path.write_bytes(npy_with_header(header))
    with pytest.raises(InvalidInput):
        load_held_out(path)
    argv = ["calibrate", "--held-out", str(path), "--epsilon", "1", "--cohort", "100"]
    assert main(argv) == 2
