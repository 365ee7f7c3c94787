"""SQLite's own files beside a database: ``X-wal``, ``X-shm``, ``X-journal``.

SQLite takes a file named ``X-wal`` for database ``X``'s write-ahead log (and ``X-shm``,
``X-journal`` alike): it deletes, truncates or overwrites it whenever ``X`` is used. So a
ledger or key store is never *named* so, and ``X`` is never opened while such a file
beside it is not SQLite's own (another ledger, say): both refused with InvalidInput, and
both files are left byte-identical. SQLite's real files still pass: a WAL a killed writer
left is recovered as before, and so is a hot rollback journal.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from factories import SPATIAL, spatial

from dpledger import Ledger, ReleaseRequest
from dpledger.cli.main import main
from dpledger.errors import InvalidInput, StoreError
from dpledger.service.keys import Scopes
from dpledger.service.store import ServiceStore

SIDECARS = ("-wal", "-shm", "-journal")
REQ = ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="eu-west", cohort=2400)
REQ2 = ReleaseRequest(epoch=2, metric="clipped_mean_loss", region="eu-west", cohort=2400)
AGG = np.float64(1234.5)


def make_ledger(path: Path) -> bytes:
    """A ledger with one release at ``path``, closed (no -wal/-shm left); its bytes."""
    with Ledger.open(path, spatial(), mode="create") as ledger:
        ledger.release(REQ, AGG)
    for s in SIDECARS:
        assert not Path(f"{path}{s}").exists()
    return path.read_bytes()


def files_in(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def cli_args(cmd: list[str], ledger: Path, agg: Path) -> list[str]:
    args = [*cmd, "--policy", str(SPATIAL), "--ledger", str(ledger)]
    if cmd == ["release"]:
        args += ["--epoch", "0", "--metric", "clipped_mean_loss", "--region", "eu-west"]
        args += ["--cohort", "2400", "--aggregate", str(agg)]
    return args


# -- a database named like SQLite's own files -----------------------------------------


@pytest.mark.parametrize("suffix", [*SIDECARS, "-WAL"])
@pytest.mark.parametrize("mode", ["read", "write", "create"])
def test_a_ledger_path_named_like_a_sidecar_is_refused_and_nothing_is_created(
    tmp_path: Path, suffix: str, mode: str
) -> None:
    base = tmp_path / "X.db"
    before = make_ledger(base)
    with pytest.raises(InvalidInput, match="named like SQLite's"):
        Ledger.open(f"{base}{suffix}", spatial(), mode=mode)  # type: ignore[arg-type]
    assert files_in(tmp_path) == {"X.db": before}


@pytest.mark.parametrize("suffix", SIDECARS)
def test_an_existing_database_named_like_a_sidecar_is_refused_and_left_as_it_was(
    tmp_path: Path, suffix: str
) -> None:
    other = tmp_path / f"X.db{suffix}"
    other_bytes = make_ledger(tmp_path / "other.db")
    (tmp_path / "other.db").rename(other)  # what an earlier dpledger let be created
    for mode in ("read", "write", "create"):
        with pytest.raises(InvalidInput, match="name it without the"):
            Ledger.open(other, spatial(), mode=mode)  # type: ignore[arg-type]
    assert files_in(tmp_path) == {other.name: other_bytes}


def test_a_symlink_to_a_sidecar_name_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "L.db"
    link.symlink_to(tmp_path / "X.db-wal")
    with pytest.raises(InvalidInput, match="named like SQLite's write-ahead log"):
        Ledger.open(link, spatial(), mode="create")
    assert not (tmp_path / "X.db-wal").exists()


# -- X opened beside a file that is not SQLite's own ----------------------------------


def _other_ledger(path: Path) -> None:
    make_ledger(path.with_name("other.db"))
    path.with_name("other.db").rename(path)


FOREIGN = {
    "ledger": _other_ledger,
    "text": lambda p: p.write_bytes(b"my notes, not a journal\n" * 4),
    "short": lambda p: p.write_bytes(b"\x01"),
}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
@pytest.mark.parametrize("suffix", SIDECARS)
@pytest.mark.parametrize("mode", ["read", "write", "create"])
def test_a_foreign_file_beside_the_ledger_is_refused_and_both_stay_byte_identical(
    tmp_path: Path, kind: str, suffix: str, mode: str
) -> None:
    base = tmp_path / "X.db"
    make_ledger(base)
    FOREIGN[kind](Path(f"{base}{suffix}"))
    before = files_in(tmp_path)
    with (
        pytest.raises(InvalidInput, match=rf"X\.db{suffix} .* move .* away"),
        Ledger.open(base, spatial(), mode=mode) as ledger,  # type: ignore[arg-type]
    ):
        ledger.release(REQ, AGG)
    assert files_in(tmp_path) == before  # no -wal/-shm created, nothing changed


def test_a_journal_without_its_database_is_still_refused_at_creation(tmp_path: Path) -> None:
    base = tmp_path / "X.db"
    _other_ledger(Path(f"{base}-journal"))
    before = files_in(tmp_path)
    with pytest.raises(StoreError, match="journal without its database"):
        Ledger.open(base, spatial(), mode="create")
    assert files_in(tmp_path) == before


def test_an_empty_sidecar_is_sqlites_own_and_passes(tmp_path: Path) -> None:
    base = tmp_path / "X.db"
    make_ledger(base)
    Path(f"{base}-wal").touch()  # SQLite leaves an empty WAL between writes
    with Ledger.open(base, spatial(), mode="read") as ledger:
        assert len(ledger) == 1


@pytest.mark.parametrize(
    "content",
    [b"\x18\xe2\x2d", bytes(3), bytes(32768), (3007000).to_bytes(4, "little") + bytes(32764)],
    ids=["truncated-to-3", "zeros-3", "zeroed", "index"],
)
@pytest.mark.parametrize("mode", ["read", "write"])
def test_every_state_sqlite_leaves_its_shared_memory_index_in_passes(
    tmp_path: Path, content: bytes, mode: str
) -> None:
    base = tmp_path / "X.db"
    make_ledger(base)
    Path(f"{base}-shm").write_bytes(content)  # SQLite truncates a -shm it takes over to 3
    with Ledger.open(base, spatial(), mode=mode) as ledger:  # type: ignore[arg-type]
        assert len(ledger) == 1


# -- SQLite's own files still pass and are recovered ----------------------------------

_KILLED_WRITER = """
import os, signal, sys
import numpy as np
from dpledger import Ledger, Policy, ReleaseRequest
ledger = Ledger.open(sys.argv[1], Policy.load(sys.argv[2]))
ledger._store._execute("PRAGMA wal_autocheckpoint=0")
r = ReleaseRequest(epoch=1, metric="clipped_mean_loss", region="eu-west", cohort=2400)
ledger.release(r, np.float64(1234.5))
os.kill(os.getpid(), signal.SIGKILL)  # committed into the WAL, never checkpointed
"""


def test_a_wal_left_by_a_killed_writer_opens_and_is_recovered(tmp_path: Path) -> None:
    base = tmp_path / "X.db"
    make_ledger(base)
    subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(base), str(SPATIAL)], check=False)
    wal, shm = Path(f"{base}-wal"), Path(f"{base}-shm")
    assert wal.stat().st_size > 32
    assert shm.exists()
    with Ledger.open(base, spatial(), mode="read") as ledger:
        assert len(ledger) == 2
        assert ledger.verify().ok
    with Ledger.open(base, spatial(), mode="write") as ledger:
        ledger.release(REQ2, AGG)
        assert len(ledger) == 3
        assert ledger.verify().ok
    assert not wal.exists()  # the last connection checkpointed and removed it: SQLite's own


_HOT_JOURNAL = """
import os, signal, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA cache_size=1")
c.execute("BEGIN IMMEDIATE")
for i in range(200):
    c.execute("INSERT INTO dpl_meta (key, value) VALUES (?, ?)", (f"junk{i}", "x" * 3000))
os.kill(os.getpid(), signal.SIGKILL)  # pages spilled into the file, the journal is hot
"""


def test_a_hot_rollback_journal_is_sqlites_own_and_is_rolled_back(tmp_path: Path) -> None:
    base = tmp_path / "X.db"
    make_ledger(base)
    conn = sqlite3.connect(base)
    conn.execute("PRAGMA journal_mode=DELETE")  # a ledger someone switched to a journal
    conn.close()
    subprocess.run([sys.executable, "-c", _HOT_JOURNAL, str(base)], check=False)
    journal = Path(f"{base}-journal")
    assert journal.stat().st_size > 0
    with Ledger.open(base, spatial(), mode="write") as ledger:
        assert len(ledger) == 1
        assert ledger.verify().ok
        assert not any(k.startswith("junk") for k in ledger._store.meta())
    assert not journal.exists()


# -- the service's key store ----------------------------------------------------------


def test_a_key_store_named_like_a_sidecar_is_refused(tmp_path: Path) -> None:
    for suffix in SIDECARS:
        with pytest.raises(InvalidInput, match="named like SQLite's"):
            ServiceStore.open(str(tmp_path / f"L.keys.db{suffix}"), create=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", SIDECARS)
@pytest.mark.parametrize("how", ["read", "write", "create"])
def test_a_key_store_beside_a_foreign_sidecar_is_refused(
    tmp_path: Path, suffix: str, how: str
) -> None:
    keys = tmp_path / "L.keys.db"
    with ServiceStore.open(str(keys), create=True) as store:
        store.create_key("team", Scopes(("read",), None, None))
    _other_ledger(Path(f"{keys}{suffix}"))
    before = files_in(tmp_path)
    with pytest.raises(InvalidInput, match=r"key store .* was not opened"):
        ServiceStore.open(str(keys), create=how == "create", read_only=how == "read")
    assert files_in(tmp_path) == before


# -- the command line -----------------------------------------------------------------


@pytest.fixture
def agg(tmp_path: Path) -> Path:
    path = tmp_path / "a.json"
    path.write_text("1234.5")
    return path


@pytest.mark.parametrize("suffix", SIDECARS)
@pytest.mark.parametrize("cmd", [["release"], ["ledger", "init"], ["ledger", "show"]])
def test_cli_refuses_a_sidecar_named_ledger_with_exit_2(
    tmp_path: Path, agg: Path, suffix: str, cmd: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "X.db"
    make_ledger(base)
    before = files_in(tmp_path)
    assert main(cli_args(cmd, Path(f"{base}{suffix}"), agg)) == 2
    err = capsys.readouterr().err
    assert "named like SQLite's" in err
    assert "Traceback" not in err
    assert files_in(tmp_path) == before


@pytest.mark.parametrize("suffix", SIDECARS)
@pytest.mark.parametrize(
    "cmd", [["release"], ["ledger", "show"], ["ledger", "verify"], ["ledger", "export"]]
)
def test_cli_refuses_a_ledger_beside_another_ledger_named_as_its_sidecar(
    tmp_path: Path, agg: Path, suffix: str, cmd: list[str]
) -> None:
    base = tmp_path / "X.db"
    make_ledger(base)
    _other_ledger(Path(f"{base}{suffix}"))
    before = files_in(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "dpledger.cli", *cli_args(cmd, base, agg)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "was not opened" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    assert files_in(tmp_path) == before


def test_cli_keys_refuses_a_sidecar_named_key_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "X.db"
    make_ledger(base)
    before = files_in(tmp_path)
    keys = ["keys", "create", "--ledger", str(base), "--name", "t", "--action", "read"]
    assert main([*keys, "--keys", f"{base}.keys-wal"]) == 2
    assert "named like SQLite's" in capsys.readouterr().err
    assert files_in(tmp_path) == before


def test_demo_refuses_a_sidecar_named_ledger_beside_a_demo_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d1 = tmp_path / "d1.db"
    from dpledger.sim.demo_ledger import DEMO_LABEL

    with Ledger.open(d1, spatial(), mode="create", labels=DEMO_LABEL) as ledger:
        ledger.release(REQ, AGG)
    before = files_in(tmp_path)
    for suffix in SIDECARS:
        args = ["demo", "--clients", "2000", "--quiet", "--ledger", f"{d1}{suffix}", "--fresh"]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert "named like SQLite's" in err
        assert "Traceback" not in err
    assert files_in(tmp_path) == before


def test_demo_fresh_never_removes_a_foreign_file_beside_its_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d1 = tmp_path / "d1.db"
    from dpledger.sim.demo_ledger import DEMO_LABEL

    with Ledger.open(d1, spatial(), mode="create", labels=DEMO_LABEL) as ledger:
        ledger.release(REQ, AGG)
    shutil.copy(d1, tmp_path / "d1.db-wal")  # a copy someone kept under that name
    before = files_in(tmp_path)
    assert main(["demo", "--clients", "2000", "--quiet", "--ledger", str(d1), "--fresh"]) == 2
    assert "d1.db-wal is itself an SQLite database" in capsys.readouterr().err
    assert files_in(tmp_path) == before


@pytest.mark.parametrize("suffix", SIDECARS)
def test_export_never_writes_a_file_named_like_a_databases_sidecar(
    tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "X.db"
    make_ledger(base)
    before = files_in(tmp_path)
    out = ["--out", f"{base}{suffix}", "--force"]
    assert main(["ledger", "export", "--policy", str(SPATIAL), "--ledger", str(base), *out]) == 2
    assert "named like SQLite's file beside" in capsys.readouterr().err
    assert files_in(tmp_path) == before


def test_a_hard_linked_ledger_is_refused_under_either_name_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    """SQLite names the WAL after the path: two processes opening one file by two names
    kept two logs and both spent the same allocation (found at stop 25)."""
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    make_ledger(first)
    second.hardlink_to(first)
    before = files_in(tmp_path)
    for name in (first, second):
        for mode in ("write", "read"):
            with pytest.raises(StoreError, match="2 names \\(hard links\\)"):
                Ledger.open(name, spatial(), mode=mode)  # type: ignore[arg-type]
    assert files_in(tmp_path) == before
    second.unlink()
    with Ledger.open(first, spatial()) as ledger:  # one name again: it opens
        assert ledger.spent(0, "eu-west").amount > 0


def test_a_hard_linked_ledger_never_spends_twice_across_processes(tmp_path: Path) -> None:
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    make_ledger(first)
    with Ledger.open(first, spatial()) as ledger:
        ledger.release(REQ2, AGG)  # held open, then a second name appears
        second.hardlink_to(first)
        other = (
            "import sys, numpy as np\n"
            "from factories import spatial\n"
            "from dpledger import Ledger, ReleaseRequest, StoreError\n"
            "try:\n"
            "    Ledger.open(sys.argv[1], spatial())\n"
            "except StoreError as e:\n"
            "    print('refused', e)\n"
        )
        tests_dir = str(Path(__file__).parent)
        done = subprocess.run(
            [sys.executable, "-c", other, str(second)], capture_output=True, text=True,
            timeout=120, env={**os.environ, "PYTHONPATH": tests_dir},
        )  # fmt: skip
        assert done.stdout.startswith("refused"), done.stderr
    assert not Path(f"{second}-wal").exists()


def test_a_key_store_with_two_names_is_refused(tmp_path: Path) -> None:
    keys = tmp_path / "k.db"
    with ServiceStore.open(str(keys), create=True) as store:
        store.create_key("mine", Scopes(("read",), None, None))
    (tmp_path / "k2.db").hardlink_to(keys)
    with pytest.raises(StoreError, match="hard links"):
        ServiceStore.open(str(keys))


def test_cli_refuses_a_hard_linked_ledger_with_exit_2(
    tmp_path: Path, agg: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "X.db"
    make_ledger(base)
    (tmp_path / "Y.db").hardlink_to(base)
    before = files_in(tmp_path)
    assert main(cli_args(["release"], base, agg)) == 2
    err = capsys.readouterr().err
    assert "hard links" in err
    assert "Traceback" not in err
    assert files_in(tmp_path) == before
