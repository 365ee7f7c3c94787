"""A creator killed (SIGKILL) at ``os.link`` while it links a new SQLite file into place,
and temporaries that dpledger must never remove: shared by the ledger's and the key
store's killed-creation tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dpledger._creating import temp_for

__all__ = ["killed_creator", "temps_not_ours_to_remove"]

REPO = Path(__file__).resolve().parents[1]
_CREATOR = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
path, point, extra = sys.argv[2], sys.argv[3], sys.argv[4:]
real_link = os.link
def link(src, dst, *args, **kwargs):
    if point == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    real_link(src, dst, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
os.link = link
"""


def killed_creator(path: Path, point: str, creation: str, *extra: str) -> Path:
    """Run ``creation`` (Python reading ``path`` and ``extra``) in a child that kills
    itself just ``point`` ("before" or "after") its link; the temporary it left."""
    done = subprocess.run(
        [sys.executable, "-c", _CREATOR + creation, str(REPO), str(path), point, *extra],
        timeout=120,
        capture_output=True,
    )
    assert done.returncode == -9, done.stderr.decode()
    left = sorted(path.parent.glob(f".{path.name}.*.creating"))
    assert len(left) == 1
    return left[0]


def temps_not_ours_to_remove(p: Path) -> tuple[Path, Path, Path]:
    """Temporary names for ``p`` whose creator may run: this process's, pid 1's, and one
    of another host's process space (none created here)."""
    alive = temp_for(p)  # this process's pid: its creator runs
    parts = alive.name.split(".")
    pid = len(p.name.split(".")) + 1  # "." + the name's parts, then the pid
    parts[pid] = "1"  # pid 1 runs
    init = p.with_name(".".join(parts))
    parts[pid], parts[pid + 1] = "999999999", "abcdef012345"  # another host's process space
    return alive, init, p.with_name(".".join(parts))
