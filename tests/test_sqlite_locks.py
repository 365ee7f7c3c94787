"""A second handle on a ledger never drops the first one's SQLite locks (audit 2, finding 0).

POSIX locks belong to a (process, file) pair: closing any descriptor of the file drops
them all. Opening a second ``Ledger`` on a file read its header with ``open()``/``close()``
— and a read handle opened ``immutable`` closed its descriptor outside SQLite's
bookkeeping — so the process's write connection lost its locks. Another process's
release then took itself for the last user, checkpointed and deleted the live WAL; the
first process kept committing into the deleted WAL and approved an allocation the other
had spent, and one of the two entries was lost while ``verify`` said ok.

Here the other process is real (a subprocess); each test asserts the WAL survives, the
allocation is spent once, and every entry is in the file afterwards.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger import _sqlite_files as sqlite_files
from dpledger.errors import NotALedger
from dpledger.service.keys import Scopes
from dpledger.service.store import ServiceStore

COVERAGE = {"metric": "coverage", "region": "na", "cohort": 2400,
            "edges_version": "coverage-cells/v1"}  # fmt: skip
VALUE = [1.0] * 6
OTHER = """
import sys, warnings
warnings.simplefilter("ignore")
import dpledger as dl
p = dl.Policy.load(sys.argv[1])
with dl.Ledger.open(sys.argv[2], p) as ledger:
    try:
        ledger.release(dl.ReleaseRequest(epoch=int(sys.argv[3]), metric="coverage", region="na",
                       cohort=2400, edges_version="coverage-cells/v1"), [1.0] * 6)
        print("released")
    except dl.BudgetExceeded:
        print("refused")
"""


def other_process_releases(path: Path, epoch: int) -> str:
    """Release coverage/na in ``epoch`` from another process: 'released' or 'refused'."""
    done = subprocess.run(
        [sys.executable, "-c", OTHER, str(SPATIAL), str(path), str(epoch)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout.strip()


@contextlib.contextmanager
def held_elsewhere(path: Path, script: str | None = None) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the ledger at ``path`` (``script``, :data:`HOLD` by default,
    prints "holding" once it does); it is told to finish (a newline) on leaving."""
    holder = subprocess.Popen(
        [sys.executable, "-c", script or HOLD, str(SPATIAL), str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        yield holder
    finally:
        holder.communicate("\n", timeout=60)


def release(ledger: dl.Ledger, epoch: int) -> str:
    try:
        ledger.release(dl.ReleaseRequest(epoch=epoch, **COVERAGE), VALUE)  # type: ignore[arg-type]
    except dl.BudgetExceeded:
        return "refused"
    return "released"


def coverage_entries(path: Path) -> int:
    with dl.Ledger.open(path, dl.Policy.load(SPATIAL), mode="read") as ledger:
        assert ledger.verify().ok
        return sum(e.draft.metric == "coverage" for e in ledger.entries())


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "l.db"
    with dl.Ledger.open(p, dl.Policy.load(SPATIAL), mode="create") as ledger:
        ledger.init()
    assert not Path(f"{p}-wal").exists()  # closed: nobody has it open
    return p


def test_a_second_handle_keeps_the_first_ones_locks(path: Path) -> None:
    policy = dl.Policy.load(SPATIAL)
    with dl.Ledger.open(path, policy) as writer:
        assert release(writer, 0) == "released"
        with dl.Ledger.open(path, policy, mode="read"):  # read the header: drop no locks
            assert other_process_releases(path, 1) == "released"
            assert Path(f"{path}-wal").exists()  # the other process knew it was not alone
            assert release(writer, 1) == "refused"  # it sees the other's spend
            assert release(writer, 2) == "released"
            assert other_process_releases(path, 2) == "refused"
    assert coverage_entries(path) == 3  # none lost


def test_an_immutable_read_handle_closed_first_keeps_the_writers_locks(path: Path) -> None:
    policy = dl.Policy.load(SPATIAL)
    reader = dl.Ledger.open(path, policy, mode="read")  # no -wal/-shm: opened immutable
    reader.entries()
    with dl.Ledger.open(path, policy) as writer:
        assert release(writer, 0) == "released"
        reader.close()  # SQLite defers closing its descriptor while the writer holds locks
        assert other_process_releases(path, 1) == "released"
        assert Path(f"{path}-wal").exists()
        assert release(writer, 1) == "refused"
        assert release(writer, 2) == "released"
        assert other_process_releases(path, 2) == "refused"
    assert not sqlite_files.held(path)
    assert coverage_entries(path) == 3


KEYS_OTHER = """
import sys
from dpledger.service.keys import Scopes
from dpledger.service.keys import Scopes
from dpledger.service.store import ServiceStore
with ServiceStore.open(sys.argv[1]) as store:
    store.create_key("other", Scopes(("read",), None, None))
"""


def test_a_second_key_store_handle_keeps_the_first_ones_locks(tmp_path: Path) -> None:
    keys = tmp_path / "l.keys.db"
    with ServiceStore.open(str(keys), create=True) as service:  # a running service's store
        service.create_key("mine", Scopes(("read",), None, None))
        ServiceStore.open(str(keys)).close()  # a second handle: its header is not re-read
        subprocess.run([sys.executable, "-c", KEYS_OTHER, str(keys)], check=True, timeout=120)
        assert Path(f"{keys}-wal").exists()  # the other process knew it was not alone
        service.create_key("mine-too", Scopes(("read",), None, None))
        assert sorted(k.name for k in service.list_keys()) == ["mine", "mine-too", "other"]
    assert not sqlite_files.held(keys)
    with ServiceStore.open(str(keys), read_only=True) as after:
        assert len(after.list_keys()) == 3


def test_a_header_is_read_only_when_no_connection_holds_the_file(tmp_path: Path) -> None:
    p = tmp_path / "x.bin"
    p.write_bytes(b"not sqlite at all")
    assert sqlite_files.read_header(p, 6) == b"not sq"
    with pytest.raises(NotALedger):
        dl.Ledger.open(p, dl.Policy.load(SPATIAL))
    assert p.read_bytes() == b"not sqlite at all"


def test_an_unclosed_connection_is_uncounted_when_collected(path: Path) -> None:
    """The count held each connection strongly: Ledgers dropped without close() kept
    their descriptors open forever (review s24)."""
    import gc

    policy = dl.Policy.load(SPATIAL)
    for _ in range(50):
        ledger = dl.Ledger.open(path, policy, mode="read")
        ledger.entries()
        del ledger
    gc.collect()
    assert not sqlite_files.held(path)
    assert len(os.listdir("/proc/self/fd")) < 200


def test_two_read_handles_in_one_process_create_nothing(path: Path) -> None:
    """A second read handle chose a read-only WAL connection because the first (an
    immutable one) was counted, and left -wal and -shm behind (review s24)."""
    policy = dl.Policy.load(SPATIAL)
    before = sorted(os.listdir(path.parent))
    with (
        dl.Ledger.open(path, policy, mode="read") as a,
        dl.Ledger.open(path, policy, mode="read") as b,
    ):
        assert len(a.entries()) == len(b.entries()) == 0
    assert sorted(os.listdir(path.parent)) == before


def test_a_fifo_in_place_of_a_header_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "f.db"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        sqlite_files.read_header(fifo, 16)


def test_the_demo_never_removes_the_files_of_a_ledger_its_process_holds(tmp_path: Path) -> None:
    from dpledger.sim.demo_ledger import claim_ledger, demo_labels

    made = tmp_path / "d.db"
    with dl.Ledger.open(made, dl.Policy.load(SPATIAL), mode="create",
                        labels=demo_labels(made)) as ledger:  # fmt: skip
        ledger.init()
        with pytest.raises(dl.InvalidInput, match="open in this process"):
            claim_ledger(made, fresh=True)
        assert made.exists()
    claim_ledger(made, fresh=True)
    assert not made.exists()


def test_a_ledger_renamed_over_a_held_one_is_refused_until_it_is_closed(path: Path) -> None:
    """SQLite names -wal and -shm after the path: a file renamed over a ledger this process
    holds would share the held one's files (its sidecar check would also have opened and
    closed the held -shm, dropping its WAL locks; review s24, left at stop 24)."""
    policy = dl.Policy.load(SPATIAL)
    other = path.with_name("other.db")
    with dl.Ledger.open(other, policy, mode="create") as ledger:
        ledger.init()
    with dl.Ledger.open(path, policy) as writer:
        assert release(writer, 0) == "released"
        shm = Path(f"{path}-shm").read_bytes()
        os.replace(other, path)
        with pytest.raises(dl.StoreError, match="renamed, copied or created there"):
            dl.Ledger.open(path, policy, mode="read").entries()
        with pytest.raises(dl.StoreError, match="renamed, copied or created there"):
            dl.Ledger.open(path, policy).spent(0, "na")
        assert Path(f"{path}-shm").read_bytes() == shm  # the held file's, untouched
        # the held file has no name left: a release into it would vanish with it, its
        # spend forgotten by the file now at the name (review 42 svc: it was "released")
        with pytest.raises(dl.StoreError, match="was removed"):
            release(writer, 1)
    assert not sqlite_files.held(path)


def test_a_policy_file_named_by_mistake_is_never_read_from_a_ledger_this_process_holds(
    path: Path,
) -> None:
    """Audit 3: ``Policy.load(ledger)`` opened and closed the held ledger file itself (the
    bounded file reader), dropping the writer's locks; another process then deleted the live
    WAL and the allocation was spent twice."""
    policy = dl.Policy.load(SPATIAL)
    with dl.Ledger.open(path, policy) as writer:
        assert release(writer, 0) == "released"
        with pytest.raises(dl.PolicyError, match="this process has open"):
            dl.Policy.load(path)
        assert other_process_releases(path, 1) == "released"
        assert Path(f"{path}-wal").exists()  # the other process knew it was not alone
        assert release(writer, 1) == "refused"
    assert coverage_entries(path) == 2
    assert dl.Policy.load(SPATIAL) == policy  # any other file reads as before


def test_a_collection_inside_the_registry_lock_never_deadlocks(path: Path) -> None:
    """Audit 3: a dropped Ledger sits in a reference cycle, so the cyclic collector frees
    its connection, and the finalizer took the registry's (non-reentrant) lock: a
    collection starting while the same thread held that lock waited on itself forever."""
    import gc
    import threading

    policy = dl.Policy.load(SPATIAL)
    done = threading.Event()

    def drop_then_collect_inside_the_lock() -> None:
        gc.disable()  # the ledger is freed by the collection below, not before
        try:
            ledger = dl.Ledger.open(path, policy, mode="read")
            ledger.entries()
            del ledger
            assert sqlite_files.held(path)  # not yet collected
            with sqlite_files._LOCK:
                gc.collect()
        finally:
            gc.enable()
        done.set()

    worker = threading.Thread(target=drop_then_collect_inside_the_lock, daemon=True)
    worker.start()
    assert done.wait(30), "a collection inside the registry lock deadlocked"
    assert not sqlite_files.held(path)


HOLD = """
import sys, time, warnings
warnings.simplefilter("ignore")
import dpledger as dl
with dl.Ledger.open(sys.argv[2], dl.Policy.load(sys.argv[1])) as ledger:
    ledger.entries()
    print("holding", flush=True)
    sys.stdin.readline()
"""


def test_a_ledger_renamed_while_another_process_holds_it_is_refused_by_its_new_name(
    path: Path,
) -> None:
    """Audit 3: process A holds the ledger, it is renamed (log rotation, tidying up), and a
    release through the new name kept a second write-ahead log: both spent the allocation."""
    with held_elsewhere(path):
        moved = path.with_name("moved.db")
        os.rename(path, moved)
        policy = dl.Policy.load(SPATIAL)
        for mode in ("write", "read"):
            with pytest.raises(dl.StoreError, match="in use by another process under another"):
                dl.Ledger.open(moved, policy, mode=mode).entries()  # type: ignore[arg-type]
        assert not Path(f"{moved}-wal").exists()
        assert not Path(f"{moved}-shm").exists()
    assert coverage_entries(moved) == 0  # once A has closed it, the new name opens


def test_a_ledger_renamed_while_this_process_holds_it_is_refused_by_its_new_name(
    path: Path,
) -> None:
    policy = dl.Policy.load(SPATIAL)
    with dl.Ledger.open(path, policy) as writer:
        assert release(writer, 0) == "released"
        moved = path.with_name("moved.db")
        os.rename(path, moved)
        with pytest.raises(dl.StoreError, match="open in this process under another name"):
            dl.Ledger.open(moved, policy)
        assert release(writer, 1) == "released"
    # SQLite neither checkpoints nor removes a moved file's log at close: both commits
    # would have stayed in l.db-wal, lost to moved.db; they were checkpointed into it
    assert coverage_entries(moved) == 2


def test_commits_before_a_rename_reach_the_file_under_its_new_name(path: Path) -> None:
    policy = dl.Policy.load(SPATIAL)
    with dl.Ledger.open(path, policy) as writer:
        assert release(writer, 0) == "released"  # in the log named after l.db
        moved = path.with_name("moved.db")
        os.rename(path, moved)
    assert coverage_entries(moved) == 1


def test_a_ledger_renamed_in_use_and_later_moved_back_loses_nothing(path: Path) -> None:
    """Review s25: the close after a rename checkpointed but left the frames in the old
    name's log; moved back later, SQLite replayed them over newer entries (3 lost)."""
    policy = dl.Policy.load(SPATIAL)
    moved = path.with_name("moved.db")
    with dl.Ledger.open(path, policy) as writer:
        assert release(writer, 0) == "released"
        os.rename(path, moved)
        assert release(writer, 1) == "released"
    assert Path(f"{path}-wal").stat().st_size == 0  # emptied at close: nothing to replay
    for epoch in (2, 3, 4):
        assert other_process_releases(moved, epoch) == "released"
    os.rename(moved, path)
    assert coverage_entries(path) == 5


def test_a_held_ledgers_sidecar_named_as_a_policy_is_never_opened(path: Path) -> None:
    """Review s25: the bounded reader refused the held database but opened and closed its
    -shm (where SQLite keeps the WAL locks) and -wal, dropping the writer's locks there."""
    policy = dl.Policy.load(SPATIAL)
    with dl.Ledger.open(path, policy) as writer:
        assert release(writer, 0) == "released"
        for suffix in ("-shm", "-wal"):
            with pytest.raises(dl.PolicyError, match="this process has open"):
                dl.Policy.load(f"{path}{suffix}")
        assert other_process_releases(path, 1) == "released"
        assert Path(f"{path}-wal").exists()
        assert release(writer, 1) == "refused"


READ_FOR_A_WHILE = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1])
c.execute("BEGIN")
c.execute("SELECT count(*) FROM dpl_entries").fetchall()
print("reading", flush=True)
sys.stdin.readline()
c.execute("COMMIT")
"""


def test_a_rollback_journal_ledger_read_by_another_process_still_opens(path: Path) -> None:
    """Review s25: a ledger restored with VACUUM INTO keeps a rollback journal and never has a
    -shm; another process's read transaction made it look used under another name."""
    import sqlite3

    restored = path.with_name("restored.db")
    con = sqlite3.connect(path)
    con.execute(f"VACUUM INTO '{restored}'")
    con.close()
    reader = subprocess.Popen(
        [sys.executable, "-c", READ_FOR_A_WHILE, str(restored)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert reader.stdout is not None
        assert reader.stdout.readline().strip() == "reading"
        with dl.Ledger.open(restored, dl.Policy.load(SPATIAL), mode="read") as ledger:
            assert ledger.entries() == []
    finally:
        reader.communicate("\n", timeout=60)


def test_a_new_ledger_where_a_dropped_one_was_deleted_opens(tmp_path: Path) -> None:
    """Review s25 (a notebook cell re-run): the previous Ledger was dropped without close()
    and not yet collected, its files deleted, a new one created at the same path."""
    import gc

    policy = dl.Policy.load(SPATIAL)
    p = tmp_path / "nb.db"
    gc.disable()
    try:
        for _ in range(3):
            for f in tmp_path.glob("nb.db*"):
                f.unlink()
            ledger = dl.Ledger.open(p, policy, mode="create")
            assert release(ledger, 0) == "released"
            del ledger
    finally:
        gc.enable()
        gc.collect()
    assert coverage_entries(p) == 1


def test_two_names_left_by_an_interrupted_creation_are_named(tmp_path: Path) -> None:
    p = tmp_path / "l.db"
    with dl.Ledger.open(p, dl.Policy.load(SPATIAL), mode="create") as ledger:
        ledger.init()
    (tmp_path / ".l.db.123.abcd1234.creating").hardlink_to(p)  # killed between link, unlink
    with pytest.raises(dl.StoreError, match=r"\.l\.db\.123\.abcd1234\.creating beside it"):
        dl.Ledger.open(p, dl.Policy.load(SPATIAL))
