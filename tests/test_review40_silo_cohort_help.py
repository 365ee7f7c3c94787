"""Review 40 (silo): the request's ``cohort`` field (the service's OpenAPI schema) and
``dpledger release --cohort``'s help said that under ``add_remove`` the aggregator "must
sum at most this many" of the planned cohort — i.e. cut the records (or clients) down to
it. The docs forbid that ("Never truncate to the planned cohort": where it binds, one more
person pushes another's record out, twice what the ledger charges;
tests/test_review_priv_truncation.py guards the docs only). Both texts now say to plan it
at or above the expected count and never to truncate. Deterministic."""

from __future__ import annotations

import pytest

from dpledger.approval.request import ReleaseRequest


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_cohort_field_never_asks_for_at_most_the_planned_count() -> None:
    said = _flat(ReleaseRequest.model_fields["cohort"].description or "")
    assert "at most this many" not in said
    assert "never truncate" in said


def test_the_cli_cohort_help_never_asks_for_at_most_the_planned_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dpledger.cli.main import main

    with pytest.raises(SystemExit):
        main(["release", "--help"])
    said = _flat(capsys.readouterr().out)
    assert "at most this many" not in said
    assert "never truncate to it" in said
