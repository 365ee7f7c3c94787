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
    namespace: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), namespace)
    release = namespace["release"]
    assert isinstance(release, dl.Release)
    assert release.entry_id == 1
    assert (tmp_path / "dpledger.db").exists()
