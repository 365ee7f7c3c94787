"""Review 40 (docs): ``dpledger check|release --help`` said ``--cohort`` is "clients summed
into the aggregate". Under ``add_remove`` that count is private: the README, the privacy
model and ``ReleaseRequest.cohort`` all say to pass the cohort planned before the round,
never the count of who reported (the cohort is published in every entry). The help told
an operator to publish the private count; it now says what the docs say."""

from __future__ import annotations

import pytest

from dpledger.cli.main import main


@pytest.mark.parametrize("command", ["check", "release"])
def test_cohort_help_names_the_planned_cohort_under_add_remove(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "under add_remove the planned cohort fixed before the round" in text
    assert "never the count of who reported" in text
    assert "records under a record-level policy" in text


def test_calibrate_help_names_the_neighbouring_default(capsys: pytest.CaptureFixture[str]) -> None:
    """``calibrate --neighbouring`` defaults to replace (the sensitivity high − low, not
    max |bound|); its help said only "policy rule"."""
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    assert "(default replace)" in " ".join(capsys.readouterr().out.split())
