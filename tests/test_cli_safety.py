"""The CLI at its edges: reads that create nothing, typed exits, no tracebacks.

Exit codes: 0 ok, 1 refused or failed verification, 2 usage or input error, 3 internal.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger.cli.main import main

READS = (
    ["ledger", "verify"],
    ["ledger", "show"],
    ["ledger", "export"],
    ["ledger", "lifetime"],
)
REQ = {
    "epoch": 0,
    "metric": "error_histogram",
    "region": "na",
    "cohort": 3000,
    "edges_version": "abs-error-m/v1",
}


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dpledger.cli", *args],
        capture_output=True, text=True, check=False, input=stdin,
    )  # fmt: skip


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "hist.json").write_text(json.dumps([100.0] * 7))
    (tmp_path / "req.json").write_text(json.dumps(REQ))
    return {"dir": str(tmp_path), "req": str(tmp_path / "req.json"),
            "agg": str(tmp_path / "hist.json")}  # fmt: skip


def at(ledger: str | Path) -> list[str]:
    return ["--policy", str(SPATIAL), "--ledger", str(ledger)]


def release(ledger: str | Path, files: dict[str, str], *extra: str) -> list[str]:
    return ["release", *at(ledger), "--request", files["req"], "--aggregate", files["agg"], *extra]


def no_traceback(err: str) -> None:
    assert "Traceback" not in err
    assert "errors.pydantic.dev" not in err


@pytest.mark.parametrize("command", [*READS, ["check"]], ids=lambda c: " ".join(c))
def test_reading_a_mistyped_path_exits_2_and_creates_nothing(
    tmp_path: Path, files: dict[str, str], command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    typo = tmp_path / "typo.db"
    extra = ["--request", files["req"], "--aggregate", files["agg"]] if command == ["check"] else []
    assert main([*command, *at(typo), *extra]) == 2
    err = capsys.readouterr().err
    assert "no ledger at" in err
    no_traceback(err)
    assert sorted(os.listdir(tmp_path)) == ["hist.json", "req.json"]


def test_a_refused_release_creates_no_ledger(tmp_path: Path, files: dict[str, str]) -> None:
    db = tmp_path / "new.db"
    assert main(release(db, files, "--cohort", "10")) == 1  # below the cohort floor
    assert not db.exists()
    assert main(release(db, files)) == 0
    assert db.exists()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(b""), "empty file (0 bytes)"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: p.write_text("a shopping list"), "not an SQLite database"),
        (
            lambda p: __import__("sqlite3").connect(p).execute("CREATE TABLE t (x)"),
            "not a dpledger",
        ),
    ],
    ids=["zero bytes", "directory", "text file", "other sqlite database"],
)
def test_a_path_that_is_not_a_ledger_is_refused_by_every_command_and_left_alone(
    tmp_path: Path, files: dict[str, str], make: object, message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    path = tmp_path / "ledger.db"
    make(path)  # type: ignore[operator]
    before = path.read_bytes() if path.is_file() else None
    for command in (*READS, ["ledger", "init"]):
        # a 0-byte file may be what is left of a ledger: verify reports it failed (exit 1)
        failed = command == ["ledger", "verify"] and message.startswith("empty")
        assert main([*command, *at(path)]) == (1 if failed else 2), command
        out, err = capsys.readouterr()
        assert message in out + err
        no_traceback(err)
    assert main(release(path, files)) == 2
    assert message in capsys.readouterr().err
    if before is not None:
        assert path.read_bytes() == before


@pytest.fixture
def read_only_copy(tmp_path: Path, files: dict[str, str]) -> Iterator[Path]:
    src = tmp_path / "src.db"
    assert main(release(src, files)) == 0
    ro_dir = tmp_path / "ro"
    ro_dir.mkdir()
    copy = ro_dir / "ledger.db"
    copy.write_bytes(src.read_bytes())
    copy.chmod(0o444)
    ro_dir.chmod(0o555)
    yield copy
    ro_dir.chmod(0o755)


def test_a_read_only_copy_verifies_without_writing_anything(read_only_copy: Path) -> None:
    before = read_only_copy.read_bytes()
    for command in READS:
        proc = cli(*command, *at(read_only_copy))
        assert proc.returncode == 0, proc.stderr
    assert "verified 1 entries: ok" in cli("ledger", "verify", *at(read_only_copy)).stdout
    assert os.listdir(read_only_copy.parent) == ["ledger.db"]  # no -wal, no -shm
    assert read_only_copy.read_bytes() == before
    assert stat.S_IMODE(read_only_copy.stat().st_mode) == 0o444


def test_reading_a_writable_ledger_leaves_its_bytes_and_directory_as_they_were(
    tmp_path: Path, files: dict[str, str]
) -> None:
    db = tmp_path / "l.db"
    assert main(release(db, files)) == 0
    before = (db.read_bytes(), sorted(os.listdir(tmp_path)))
    for command in READS:
        assert cli(*command, *at(db)).returncode == 0
    assert (db.read_bytes(), sorted(os.listdir(tmp_path))) == before


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("deep.json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("bad.json", "[1, 2,", "not valid JSON"),
        ("ragged.json", "[[1, 2], [3]]", "not an array of numbers"),
    ],
)
def test_an_unreadable_aggregate_exits_2_with_one_line(
    tmp_path: Path, files: dict[str, str], name: str, content: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    proc = cli("release", *at(tmp_path / "l.db"), "--request", files["req"], "--aggregate",
               str(path))  # fmt: skip
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    no_traceback(proc.stderr)
    assert not (tmp_path / "l.db").exists()


def test_an_npy_header_claiming_1e11_values_is_refused_before_allocating(
    tmp_path: Path, files: dict[str, str]
) -> None:
    path = tmp_path / "huge.npy"
    np.save(path, np.zeros(7))
    data = path.read_bytes().replace(b"(7,)", b"(100000000000,)")
    path.write_bytes(data)
    proc = cli("check", *at(tmp_path / "l.db"), "--request", files["req"], "--aggregate", str(path))
    assert proc.returncode == 2
    assert "100,000,000,000 values" in proc.stderr
    assert "pass one metric's aggregate" in proc.stderr  # what to do, as for a JSON file
    no_traceback(proc.stderr)


@pytest.mark.parametrize("bad", [{"epoch": True}, {"cohort": "3000"}, {"cohort": 3000.0}])
def test_a_request_with_a_coerced_number_exits_2(
    tmp_path: Path, files: dict[str, str], bad: dict[str, object]
) -> None:
    (tmp_path / "req.json").write_text(json.dumps({**REQ, **bad}))
    proc = cli(*release(tmp_path / "l.db", files))
    assert proc.returncode == 2
    assert next(iter(bad)) in proc.stderr
    no_traceback(proc.stderr)


def test_policy_problems_are_listed_in_one_message(tmp_path: Path, files: dict[str, str]) -> None:
    bad = tmp_path / "bad.toml"
    text = SPATIAL.read_text().replace('"replace"', '"swap"').replace('cap_per_client = "40"', "")
    bad.write_text(text)
    proc = cli("ledger", "show", "--policy", str(bad), "--ledger", str(tmp_path / "l.db"))
    assert proc.returncode == 2
    assert "neighbouring" in proc.stderr
    assert "metrics.error_histogram" in proc.stderr
    assert "more problems" not in proc.stderr
    no_traceback(proc.stderr)
    bad.write_bytes(b"name = \xff")
    proc = cli("ledger", "show", "--policy", str(bad), "--ledger", str(tmp_path / "l.db"))
    assert proc.returncode == 2
    assert "UTF-8" in proc.stderr


def test_an_internal_error_exits_3_and_shows_its_traceback_only_with_debug(
    tmp_path: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    import dpledger.cli.main as cli_module

    def broken(self: object, *a: object, **k: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(cli_module.Ledger, "release", broken)
    assert main(release(tmp_path / "l.db", files)) == 3
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: boom" in err
    no_traceback(err)
    assert main([*release(tmp_path / "l.db", files), "--debug"]) == 3
    assert "Traceback" in capsys.readouterr().err


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path, files: dict[str, str]) -> None:
    db = tmp_path / "l.db"
    with dl.Ledger.open(str(db), dl.Policy.load(SPATIAL), mode="create") as ledger:
        hist = np.full(7, 100.0)  # 300 entries in one round: more than a pipe's buffer
        ledger.release_round([(dl.ReleaseRequest(**{**REQ, "epoch": e}), hist) for e in range(300)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "dpledger.cli", "ledger", "export", *at(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()  # `| head -1`
    _, err = proc.communicate()
    assert proc.returncode == 0
    assert err == b""


def test_lifetime_refuses_an_unknown_region_and_headlines_the_exact_pure_epsilon(
    tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.db"
    assert main(release(db, files)) == 0
    assert main(["ledger", "lifetime", *at(db), "--region", "nroth"]) == 2
    assert "unknown region 'nroth'" in capsys.readouterr().err
    assert main(["ledger", "lifetime", *at(db), "--region", "na"]) == 0
    out = capsys.readouterr().out
    assert "ε = 1/5 (pure DP, exact; δ = 0)" in out
    assert "PLD" in out


def test_show_labels_a_zcdp_ledger_in_rho_with_its_epsilon_delta_view(tmp_path: Path) -> None:
    from test_lifetime import ZCDP

    policy = tmp_path / "z.toml"
    policy.write_text(ZCDP.format(epoch_rho="100"))
    agg = tmp_path / "a.json"
    agg.write_text("5.0")
    db = tmp_path / "z.db"
    args = ["--policy", str(policy), "--ledger", str(db)]
    rel = cli("release", *args, "--epoch", "0", "--metric", "count", "--region", "north",
              "--cohort", "50", "--aggregate", str(agg))  # fmt: skip
    assert rel.returncode == 0, rel.stderr
    out = cli("ledger", "show", *args).stdout
    assert "ρ_eval 25 per client per epoch (zCDP; ≈ ε" in out
    assert re.search(r"north\s+spent ρ\s+1/200", out), out


def test_a_cli_retry_with_a_release_id_returns_the_recorded_release(
    tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.db"
    outs = []
    for _ in range(2):
        assert main([*release(db, files, "--release-id", "round-3/na"), "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    said = [(o.pop("retried"), o.pop("charged_now")) for o in outs]
    assert said == [(False, outs[0]["charge"]), (True, "0")]  # the retry charged nothing
    assert outs[0] == outs[1]
    assert outs[0]["release_id"] == "round-3/na"
    # an aggregate the recorded release cannot have come from (≈ 50 noise scales away)
    (tmp_path / "other.json").write_text(json.dumps([20000.0] + [0.0] * 6))
    other = ["--aggregate", str(tmp_path / "other.json"), "--release-id", "round-3/na"]
    assert main(["release", *at(db), "--request", files["req"], *other]) == 1
    assert "release_id" in capsys.readouterr().out


def test_export_never_overwrites_the_ledger_or_an_existing_file(
    tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.db"
    assert main(release(db, files)) == 0
    before = db.read_bytes()
    for out, message in ((db, "the ledger itself"), (tmp_path, "a directory"),
                         (tmp_path / "no" / "x.jsonl", "does not exist")):  # fmt: skip
        assert main(["ledger", "export", *at(db), "--out", str(out), "--force"]) == 2
        assert message in capsys.readouterr().err
    assert db.read_bytes() == before
    out = tmp_path / "entries.jsonl"
    out.write_text("keep me")
    assert main(["ledger", "export", *at(db), "--out", str(out)]) == 2
    assert "pass --force" in capsys.readouterr().err
    assert out.read_text() == "keep me"
    assert main(["ledger", "export", *at(db), "--out", str(out), "--force"]) == 0
    assert json.loads(out.read_text().splitlines()[0])["entry_id"] == 1


def test_reading_a_crashed_writers_wal_changes_and_removes_nothing(
    tmp_path: Path, files: dict[str, str]
) -> None:
    db = tmp_path / "l.db"
    assert main(release(db, files)) == 0
    writer = (
        "import os, signal, sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None);"
        "c.execute('PRAGMA wal_autocheckpoint=0');"
        "c.execute(\"UPDATE dpl_meta SET value = value WHERE key = 'unit'\");"
        "os.kill(os.getpid(), signal.SIGKILL)"
    )  # a writer that commits into the WAL and dies before any checkpoint
    subprocess.run([sys.executable, "-c", writer, str(db)], check=False)
    wal = Path(str(db) + "-wal")
    assert wal.exists()
    before = (db.read_bytes(), wal.read_bytes())
    proc = cli("ledger", "verify", *at(db))
    assert proc.returncode == 0, proc.stderr
    assert wal.exists()
    assert (db.read_bytes(), wal.read_bytes()) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_another_user_with_read_permission_can_verify(
    tmp_path: Path, files: dict[str, str]
) -> None:
    import pwd
    import shutil

    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no unprivileged user 'postgres' on this machine")
    db = tmp_path / "l.db"
    assert main(release(db, files)) == 0
    tmp_path.chmod(0o755)
    db.chmod(0o644)
    policy = tmp_path / "policy.toml"
    shutil.copy(SPATIAL, policy)
    policy.chmod(0o644)
    as_user = ["runuser", "-u", "postgres", "--", sys.executable]
    probe = subprocess.run([*as_user, "-c", "import dpledger"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("the user 'postgres' cannot run this interpreter (e.g. a venv under /root)")
    proc = subprocess.run(
        [*as_user, "-m", "dpledger.cli", "ledger", "verify", "--policy", str(policy),
         "--ledger", str(db)],
        capture_output=True, text=True, check=False, cwd="/",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout


def test_verify_reports_a_tampered_policy_record_instead_of_refusing_to_open(
    tmp_path: Path, files: dict[str, str]
) -> None:
    db = tmp_path / "l.db"
    assert main(release(db, files)) == 0
    con = sqlite3.connect(db)
    con.execute("UPDATE dpl_policies SET hash = 'x'")
    con.commit()
    con.close()
    proc = cli("ledger", "verify", *at(db))
    assert proc.returncode == 1
    assert "cannot be opened with this policy" in proc.stdout
    assert "does not match its content hash" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ledger", "verify", "--ledger", "x" * 5000], "ledger path"),
        (["ledger", "verify", "--ledger", "postgresql://u@[::1/x"], "PostgreSQL"),
        (["ledger", "verify", "--expected-head", "9" * 5000 + ":" + "a" * 64], "ENTRY_ID:HASH"),
        (["demo", "--clients", "0", "--ledger", "{tmp}/d.db"], "n_clients"),
    ],
    ids=["long path", "bad url", "long anchor", "no clients"],
)
def test_odd_arguments_exit_2_not_3(tmp_path: Path, args: list[str], message: str) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if argv[0] == "ledger":
        argv = [*argv[:2], "--policy", str(SPATIAL), *argv[2:]]
        if "--ledger" not in argv:
            argv += ["--ledger", str(tmp_path / "l.db")]
    proc = cli(*argv)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    no_traceback(proc.stderr)


def test_release_says_when_it_starts_a_new_ledger(tmp_path: Path, files: dict[str, str]) -> None:
    db = tmp_path / "new.db"
    first = cli(*release(db, files))
    assert first.returncode == 0
    assert "created a new ledger" in first.stderr
    second = cli(*release(db, files, "--epoch", "1"))
    assert second.returncode == 0
    assert "created" not in second.stderr


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("[100, 100, 100, 100, 100, 100, true]", "booleans among the numbers"),  # audit 6, G3
        ("true", "dtype bool"),
        ("[100, 100, 100, 100, 100, 100, " + "1" * 5000 + "]", "aggregate_finite"),  # G6
        ("[100, 100, 100, 100, 100, 100, 1" + "0" * 5000 + ".0]", "aggregate_finite"),
    ],
)
def test_an_aggregate_file_is_read_by_type_and_refused_without_a_spend(
    tmp_path: Path,
    files: dict[str, str],
    content: str,
    reason: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A JSON ``true`` beside numbers is refused as a lone ``true`` is (not promoted to 1),
    and an integer past Python's digit limit as the double it denotes, as a float of that
    size is: both refused with exit 1 and nothing written (no ledger is created)."""
    path = tmp_path / "agg.json"
    path.write_text(content)
    db = tmp_path / "l.db"
    argv = ["release", *at(db), "--request", files["req"], "--aggregate", str(path), "--json"]
    assert main(argv) == 1
    out = capsys.readouterr()
    assert reason in out.out + out.err
    assert "set_int_max_str_digits" not in out.out + out.err
    assert not db.exists()
