"""Review 41 (migrations): ``dpledger ledger --help`` names every schema ``migrate`` upgrades.

The help said "upgrade a schema-1 or -2 ledger in place" while ``migrate`` also upgrades
schema 3 (to 4, the spend guard) — the one upgrade every current ledger before schema 4
needs — so an operator reading it would think a schema-3 ledger had nothing to upgrade.
"""

from __future__ import annotations

import pytest

from dpledger.cli.main import main
from dpledger.ledger.schema import SCHEMA_VERSION


def test_ledger_help_names_every_schema_migrate_upgrades(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["ledger", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    line = text[text.index("migrate upgrade") :]
    olders = [str(v) for v in range(1, int(SCHEMA_VERSION))]
    assert f"schema-{olders[0]}, " + ", ".join(f"-{v}" for v in olders[1:-1]) in line
    assert f"or -{olders[-1]} ledger" in line
