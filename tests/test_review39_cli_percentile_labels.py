"""Review 39 (CLI): ``calibrate --percentiles 99.9999999,99.99999999`` labelled both
candidates ``p100`` (``:g`` keeps 6 digits), so the table showed two "p100" rows and the
recommended ``clip.source`` provenance named the maximum, which neither is. Labels now
keep every digit a percentile needs; plain ones (``p99``, ``p99.7``) are unchanged.
"""

from __future__ import annotations

import numpy as np

import dpledger as dl
from dpledger.cli.main import main


def test_close_percentiles_keep_distinct_labels(tmp_path, capsys):
    held = tmp_path / "h.npy"
    np.save(held, np.random.default_rng(0).exponential(1.0, 3000))
    argv = ["calibrate", "--held-out", str(held), "--epsilon", "1", "--cohort", "2000"]
    assert main([*argv, "--percentiles", "99.9999999,99.99999999,99.7"]) == 0
    out = capsys.readouterr().out
    assert "p100 " not in out
    for label in ("p99.9999999 ", "p99.99999999 ", "p99.7 "):
        assert label in out


def test_source_string_names_the_percentile_used():
    values = np.random.default_rng(1).exponential(1.0, 3000)
    cal = dl.calibrate_clip(values, epsilon=1.0, cohort=2000, percentiles=(99, 99.99999999))
    assert cal.source_string(99.99999999).split(", ")[-1].startswith("p99.99999999 = ")
    assert cal.source_string(99).split(", ")[-1].startswith("p99 = ")
