"""Review 40 (docs): docs/service.md's "On one host (SQLite)" block runs as written.

Its ``ledger init`` and both ``keys create`` lines run through the CLI (the first key's
standard output is the key file, as ``> maps-team.key`` keeps it), ``serve`` runs as a
real child process (on a free port), and its ``curl`` release is sent as written: 201,
the release carrying its principal and the ``Idempotency-Key`` as its release id; sent
again it is the recorded release, ``retried``. Nothing else in the suite ran the page's
example.
"""

from __future__ import annotations

import json
import re
import shlex
import urllib.request
from pathlib import Path

import pytest

from dpledger.cli.main import main

pytest.importorskip("fastapi")

from dpledger.service.testing import ServedProcess

ROOT = Path(__file__).resolve().parent.parent


def _block() -> str:
    text = (ROOT / "docs" / "service.md").read_text(encoding="utf-8")
    block = text[text.index("```sh\n") + 6 :]
    return re.sub(r"\\\n\s*", "", block[: block.index("```")])


def test_the_service_page_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DPLEDGER_URL", raising=False)
    monkeypatch.delenv("DPLEDGER_POLICY", raising=False)
    monkeypatch.chdir(tmp_path)
    policy, ledger = str(ROOT / "policies" / "spatial-eval.toml"), str(tmp_path / "ledger.db")
    lines = [line.split("  #", 1)[0].strip() for line in _block().splitlines()]
    assert lines[0] == "P=policies/spatial-eval.toml; L=/srv/dpledger/ledger.db"
    keys: dict[str, str] = {}
    curl = ""
    for line in lines[1:]:
        line = line.replace("$P", policy).replace("$L", ledger)
        if line.startswith("dpledger serve"):
            assert shlex.split(line)[2:] == ["--ledger", ledger, "--policy", policy,
                                             "--host", "127.0.0.1", "--port", "8000"]  # fmt: skip
        elif line.startswith("dpledger "):
            words, target = shlex.split(line.replace(">", " > "))[1:], None
            if ">" in words:
                words, target = words[: words.index(">")], words[words.index(">") + 1]
            assert main(words) == 0, words
            out = capsys.readouterr().out
            if target is not None:
                keys[target] = out.strip()
        elif line:
            curl += " " + line
    assert set(keys) == {"maps-team.key"}
    assert keys["maps-team.key"].startswith("dpl_")
    words = shlex.split(curl.replace("$(cat maps-team.key)", keys["maps-team.key"]))
    assert words[0] == "curl"
    headers = dict(words[i + 1].split(": ", 1) for i, w in enumerate(words) if w == "-H")
    body = words[words.index("-d") + 1].encode()
    url = next(w for w in words if w.startswith("http://127.0.0.1:8000/"))
    with ServedProcess(ledger, policy, "--log-level", "warning", log=tmp_path / "serve.log") as s:
        answers = []
        for _ in range(2):  # the retry is the recorded release, nothing charged
            sent = urllib.request.Request(
                url.replace("http://127.0.0.1:8000", s.url), data=body, headers=headers
            )
            with urllib.request.urlopen(sent, timeout=30) as r:
                answers.append((r.status, json.loads(r.read())))
    (first_status, first), (second_status, second) = answers
    assert (first_status, second_status) == (201, 201)
    assert first["principal"].startswith("maps-team/")
    assert first["release_id"] == headers["Idempotency-Key"] == "e7/eu-west/loss"
    assert (first["retried"], second["retried"]) == (False, True)
    assert second["entry_id"] == first["entry_id"]
    assert second["value"] == first["value"]
