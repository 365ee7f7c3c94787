"""Review 41 (migrations): a schema-1 ledger whose recorded policy body is unreadable.

The schema-1 upgrade copies each recorded policy's name out of its JSON body into the new
``name`` column. The checks before it (chain, head, spend) never read the bodies, so a
body that is not JSON, or names no policy, failed the upgrade half way with SQLite's bare
"malformed JSON" or "NOT NULL constraint failed: dpl_policies.name" (exit 2, "bad
input", naming neither the policy nor what to do). It is now a :class:`MigrationRefused`
naming the recorded policy (exit 1), and the file is left byte-identical.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from dpledger.cli.main import main
from dpledger.errors import MigrationRefused
from dpledger.ledger.migrate import migrate

FIXTURE = Path(__file__).parent / "data" / "ledger-v1.db"


@pytest.mark.parametrize(
    "body", ["not json", '{"version": "1.1.0"}', '["spatial-eval"]', '{"name": NaN}']
)
def test_an_unreadable_schema_1_policy_body_refuses_the_migration_naming_it(
    tmp_path: Path, body: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "v1.db"
    shutil.copyfile(FIXTURE, path)
    conn = sqlite3.connect(path)
    with conn:
        (h,) = conn.execute("SELECT hash FROM dpl_policies ORDER BY hash DESC").fetchone()
        conn.execute("UPDATE dpl_policies SET body = ? WHERE hash = ?", (body, h))
    conn.close()
    before = path.read_bytes()
    with pytest.raises(MigrationRefused, match=f"recorded policy {h[:12]}"):
        migrate(path)
    assert main(["ledger", "migrate", "--ledger", str(path)]) == 1
    err = capsys.readouterr().err
    assert "migration refused" in err, err
    assert "restore the ledger from a backup" in err, err
    assert path.read_bytes() == before
