"""The README's tour runs as written (executable docs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import dpledger as dl

ROOT = Path(__file__).resolve().parent.parent


def test_readme_tour_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "README.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policies").symlink_to(ROOT / "policies")
    runs = []
    for _ in range(5):  # running the tour again must never spend again
        namespace: dict[str, object] = {}
        exec(compile(block, "README.md", "exec"), namespace)
        runs.append(namespace)
    release = runs[0]["release"]
    assert isinstance(release, dl.Release)
    assert release.entry_id == 1
    assert {r["release"].entry_id for r in runs} == {1}  # type: ignore[attr-defined]
    ledger = runs[-1]["ledger"]
    assert isinstance(ledger, dl.Ledger)
    assert len(ledger) == 1
    assert ledger.spent(0, "eu-west") == release.charge
