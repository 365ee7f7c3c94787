"""Review 43 (plan): notebook 01 said "p99.7 of 2,000 is the 6th largest value".

numpy's percentile (linear interpolation, what ``calibrate_clip`` uses) puts p99.7 of
2,000 values at position 0.997 × 1999 = 1993.003 of the sorted values: the 7th largest
(the largest is position 1999), with 6 clients above it. The prose is checked against
the rank numpy gives.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).resolve().parent.parent / "notebooks" / "01-clip-bounds.py"


def test_the_stated_rank_of_p99_7_is_numpys() -> None:
    text = " ".join(SOURCE.read_text(encoding="utf-8").replace("#", " ").split())
    m = re.search(r"p99\.7 of 2,000 is the (\d+)th largest value", text)
    assert m is not None, "notebook 01 no longer states p99.7's rank: update this test"
    position = np.percentile(np.arange(2000.0), 99.7)  # index into the sorted values
    assert int(m.group(1)) == 2000 - int(position)  # 1st largest is index 1999
