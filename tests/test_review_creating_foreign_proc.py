"""Review (hrev): ``_creating`` judges a creator dead by ``/proc/PID/stat`` (a zombie has
finished). In a pid namespace whose ``/proc`` is the parent's (``unshare --pid --fork``
without ``--mount-proc``; a container sharing the host's procfs), ``/proc/PID`` is another
process: a zombie there made a LIVE creator of this namespace look dead, and an opener for
writing removed its temporary file. ``/proc`` that is not this namespace's must leave the
process space unknown (so nothing is removed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

INNER = r"""
import os, subprocess, sys, uuid
from pathlib import Path
from dpledger import _creating as c
z, d = int(sys.argv[1]), Path(sys.argv[2])
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(z - 1))
live = subprocess.Popen(["sleep", "30"])  # a live creator in this pid namespace
target = d / "l.db"
space = c._space()
tmp = target.with_name(f".{target.name}.{live.pid}.{space}.{uuid.uuid4().hex[:8]}.creating")
tmp.write_bytes(b"being built")
c.remove_dead(target)
live.kill()
print(live.pid == z, tmp.exists())
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or not Path("/proc/self").exists(),
    reason="needs root and unshare(1)",
)
def test_a_live_creator_in_a_namespace_with_a_foreign_proc_keeps_its_temp(
    tmp_path: Path,
) -> None:
    zombie = os.fork()
    if zombie == 0:
        os._exit(0)
    try:
        time.sleep(0.2)  # not reaped: a zombie under this pid in the parent namespace
        script = tmp_path / "inner.py"
        script.write_text(INNER)
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
        run = subprocess.run(
            ["unshare", "--pid", "--fork", sys.executable, str(script), str(zombie),
             str(tmp_path)],
            capture_output=True, text=True, env=env, timeout=60, check=False,
        )  # fmt: skip
        if run.returncode != 0 or run.stdout.split()[:1] != ["True"]:
            pytest.skip(f"could not place a live process on the zombie's pid: {run.stderr[-300:]}")
        assert run.stdout.split() == ["True", "True"], "a live creator's temp was removed"
    finally:
        os.waitpid(zombie, 0)
