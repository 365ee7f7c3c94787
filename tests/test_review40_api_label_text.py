"""Review 40 (api): ``Ledger.open(..., labels=...)`` took any strings, written into the
ledger's meta table by the first approved release: an unpaired surrogate (no UTF-8) was a
bare ``UnicodeEncodeError`` from ``release`` on SQLite, and a NUL a ``StoreError`` on
PostgreSQL (its text holds no NUL) that said "retry". Both are refused when the ledger is
opened now, naming the label, before anything is created."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import dpledger as dl
from tests.factories import policy

REQUEST = dl.ReleaseRequest(epoch=0, metric="loss", region="north", cohort=100)


def _policy() -> dl.Policy:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        return policy()


@pytest.mark.parametrize(
    "labels",
    [{"purpose": "\ud800"}, {"\udcff": "x"}, {"purpose": "a\x00b"}, {"a\x00": "b"}],
)
def test_a_label_no_ledger_can_store_is_refused_at_open(
    tmp_path: Path, labels: dict[str, str]
) -> None:
    path = tmp_path / "l.db"
    with pytest.raises(dl.InvalidInput, match="NUL or an unpaired surrogate"):
        dl.Ledger.open(path, _policy(), mode="create", labels=labels)
    assert list(tmp_path.iterdir()) == []


def test_text_labels_are_kept_as_plain_text(tmp_path: Path) -> None:
    class Tag(str):
        pass

    labels = {Tag("purpose"): Tag("démo ✓"), "note": "line\nbreak"}
    with dl.Ledger.open(tmp_path / "l.db", _policy(), mode="create", labels=labels) as ledger:
        ledger.release(REQUEST, 50.0)
        assert ledger.labels == {"purpose": "démo ✓", "note": "line\nbreak"}


@pytest.mark.postgres
def test_a_nul_label_is_refused_before_postgres_sees_it(pg_url: str) -> None:
    with pytest.raises(dl.InvalidInput, match="NUL"):
        dl.Ledger.open(pg_url, _policy(), mode="create", labels={"purpose": "a\x00b"})
