"""Smoke test of ``make bench``: the harness runs at ``--quick`` sizes and reports every case.

It checks that the runner finishes, prints a table row for each case (6: Flower, 7: the service),
writes valid JSON with the same rows, and that no case crashed. It never checks how
fast anything is: benchmarks are not timed tests (README, Performance).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CASES = {1, 2, 3, 4, 5, 6, 7}
ROW_KEYS = {"case", "measured", "dpledger", "baseline", "ratio_text", "target", "met", "ratio"}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """Run ``python -m benchmarks --quick`` once; return its stdout and its JSON."""
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"benchmark runner failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout, json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_quick_run_prints_a_table_row_for_every_case(
    quick_run: tuple[str, dict[str, Any]],
) -> None:
    stdout, _ = quick_run
    lines = stdout.splitlines()
    assert lines[0].split()[:3] == ["#", "measured", "dpledger"]
    printed = {int(line.split()[0]) for line in lines[2:] if line[:1].isdigit()}
    assert printed >= CASES


@pytest.mark.slow
def test_quick_run_writes_json_with_every_case_and_no_crashed_case(
    quick_run: tuple[str, dict[str, Any]],
) -> None:
    _, doc = quick_run
    rows = doc["rows"]
    assert isinstance(rows, list)
    assert {r["case"] for r in rows} >= CASES
    for r in rows:
        assert set(r) >= ROW_KEYS, r
        assert r["met"] in {"yes", "NO", "info", "skipped"}, r
    assert doc["meta"]["sizes"] == "quick"


@pytest.mark.slow
def test_every_targeted_row_says_whether_its_target_is_met(
    quick_run: tuple[str, dict[str, Any]],
) -> None:
    _, doc = quick_run
    targeted = [r for r in doc["rows"] if r["target"] not in {"-", "report"}]
    assert {r["case"] for r in targeted} == {1, 2, 3, 4, 6}
    assert all(r["met"] in {"yes", "NO"} and r["ratio"] is not None for r in targeted)


def test_the_sqlite_floor_replays_the_ledgers_own_rows(tmp_path: Path) -> None:
    """The raw floor writes what the ledger wrote: same columns, values, spend and head.

    A floor lighter than the ledger's transaction would count SQLite's cost of storing
    real entries as dpledger's own time (the narrow-row loops it replaced did).
    """
    sys.path.insert(0, str(ROOT))
    import sqlite3

    from benchmarks._raw_ledger import RawLedgerTxn, captured_rows
    from benchmarks.rounds import round_items, round_policy
    from dpledger.ledger import Ledger

    policy = round_policy()
    entries, spend = captured_rows(policy, lambda led: led.release_round(round_items(policy, 0)))
    assert len(entries) == len(round_items(policy, 0))
    assert len(spend) == len(entries)
    raw = RawLedgerTxn(tmp_path / "raw.db", policy, entries, spend)
    raw(1)
    raw(2)
    raw.close()
    conn = sqlite3.connect(tmp_path / "raw.db")
    written = conn.execute("SELECT * FROM dpl_entries ORDER BY seq").fetchall()
    head = dict(conn.execute("SELECT key, value FROM dpl_meta WHERE key LIKE 'head_%'"))
    floor_schema = conn.execute(
        "SELECT type, name, sql FROM sqlite_master ORDER BY name"
    ).fetchall()
    (journal,) = conn.execute("PRAGMA journal_mode").fetchone()
    conn.close()
    with Ledger.open(tmp_path / "ledger.db", policy, mode="create") as ledger:
        ledger.release_round(round_items(policy, 0))
    conn = sqlite3.connect(tmp_path / "ledger.db")
    ledger_schema = conn.execute(
        "SELECT type, name, sql FROM sqlite_master ORDER BY name"
    ).fetchall()
    conn.close()
    assert floor_schema == ledger_schema  # the same tables, indexes and triggers
    assert journal == "wal"
    assert [w[0] for w in written] == list(range(1, 2 * len(entries) + 1))
    assert [w[1:] for w in written[: len(entries)]] == [e[1:] for e in entries]
    assert head == {"head_seq": str(2 * len(entries)), "head_hash": entries[-1][-1]}
