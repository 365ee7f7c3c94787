"""Review 39 (diff2): ``dpledger check`` is a dry run of ``release``, but since 327b82e it
reads as a reader.

A role with a schema of its own name (``"$user", public``) and a ledger in ``public``:
``release`` (a writer) is refused with a StoreError naming both schemas, while
``check`` — opened ``mode="read"`` — now reads ``public``'s ledger and approves: the
dry run said yes to a release that cannot happen, against another schema's spend
(with ``search_path=team_b,public`` that is another team's budget). A dry run now decides
as the release would (``SqlStore.check_as_writer``). Deterministic.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger.cli.main import main

pytestmark = pytest.mark.postgres


def test_check_agrees_with_release_on_a_foreign_schema(
    pg_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = pg_server.create_database()
    policy = dl.Policy.load(str(SPATIAL))
    with dl.Ledger.open(url, policy, mode="create") as ledger:
        ledger.init()
    role = f"r_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'CREATE SCHEMA "{role}" AUTHORIZATION "{role}"')
        conn.execute(f'GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO "{role}"')
    mine = url.replace(f"//{pg_server.user}@", f"//{role}@")
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"epoch": 0, "metric": "clipped_mean_loss",
                               "region": "eu-west", "cohort": 2400}))  # fmt: skip
    agg = tmp_path / "agg.json"
    agg.write_text("1200.0")
    args = ["--policy", str(SPATIAL), "--ledger", mine, "--request", str(req),
            "--aggregate", str(agg)]  # fmt: skip
    try:
        released = main(["release", *args])
        assert released != 0  # the writer is refused: found in schema 'public'
        assert "public" in capsys.readouterr().err
        checked = main(["check", *args])
        capsys.readouterr()
        assert checked != 0  # the dry run should not approve what release refuses
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{role}" CASCADE')
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')
