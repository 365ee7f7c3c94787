"""Review 40 (docs): the README's "Command line" block runs as written.

``tests/test_readme.py`` executes the README's Python tour; nothing ran its shell block,
so a renamed option or a changed exit code would leave the README wrong unnoticed. Each
``dpledger`` line of the block (but ``serve`` and ``keys``, whose service tests start a
real server) runs here in order, its optional ``[…]`` parts included and its
placeholders (``P.toml``, ``L.db``, ``ID:HASH``, ``N`` …) filled in, and must exit 0.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from dpledger.cli.main import main

ROOT = Path(__file__).resolve().parent.parent


def _readme_lines() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text[text.index("### Command line") :]
    block = block[block.index("```sh\n") + 6 :]
    block = block[: block.index("```")]
    joined = re.sub(r"\\\n\s*", "", block)  # continuation lines
    out = []
    for line in joined.splitlines():
        line = line.split("  #", 1)[0].strip()
        if line.startswith("dpledger ") and not line.startswith(
            ("dpledger serve", "dpledger keys")
        ):
            out.append(line.replace("[", "").replace("]", "").replace(" ...", ""))
    return out


def _expand(line: str) -> list[list[str]]:
    """One command per alternative of an ``a|b|c`` word (``ledger show|verify|…``)."""
    words = shlex.split(line)[1:]
    for i, word in enumerate(words):
        if "|" in word and not word.startswith("-"):
            return [[*words[:i], alt, *words[i + 1 :]] for alt in word.split("|")]
    return [words]


def test_the_readme_command_line_block_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DPLEDGER_URL", raising=False)
    monkeypatch.delenv("DPLEDGER_POLICY", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "P.toml").write_bytes((ROOT / "policies" / "spatial-eval.toml").read_bytes())
    (tmp_path / "R.toml").write_bytes((ROOT / "policies" / "cross-silo.toml").read_bytes())
    request = {"epoch": 0, "metric": "clipped_mean_loss", "region": "eu-west", "cohort": 2400}
    (tmp_path / "req.json").write_text(json.dumps(request), encoding="utf-8")
    (tmp_path / "sum.json").write_text("1234.5", encoding="utf-8")
    np.save(tmp_path / "sum.npy", np.full(7, 100.0))
    losses = np.random.default_rng(0).gamma(2.0, 0.5, 3000)
    (tmp_path / "losses.csv").write_text(
        "loss\n" + "\n".join(map(repr, losses.tolist())) + "\n", encoding="utf-8"
    )
    (tmp_path / "plots").mkdir()
    fill = {"ID": "readme-1", "F": "out.jsonl", "D": "1e-5", "PATH": "demo.db", "DIR": "plots",
            "S": "1"}  # fmt: skip
    lines = _readme_lines()
    assert len(lines) >= 12, lines
    ran = []
    for line in lines:
        for words in _expand(line):
            args = []
            for prev, word in zip(["", *words[:-1]], words, strict=True):
                if word == "N":
                    word = "1540" if prev == "--clients" else "3"
                elif word == "R" and prev == "--region":
                    word = "eu-west"
                elif word == "ID:HASH":
                    shown = main(["ledger", "show", "--policy", "P.toml", "--ledger", "L.db",
                                  "--json"])  # fmt: skip
                    assert shown == 0
                    head = json.loads(capsys.readouterr().out)["head"]
                    word = f"1:{head}"
                else:
                    word = fill.get(word, word)
                args.append(word)
            code = main(args)
            out = capsys.readouterr()
            assert code == 0, (args, out.out[-500:], out.err[-500:])
            ran.append(args[:2])
    assert ["ledger", "migrate"] in ran
    assert ["demo", "--clients"] in ran
