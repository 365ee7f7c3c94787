"""Real small and read-only file systems for the tests of full disks and read-only mounts,
and the ``dpledger`` command run as a child process (review 41).

Each mount needs root and ``mount``; without them the test is skipped, saying why. Use
as a fixture's body: ``yield from small_tmpfs(tmp_path)``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["cli", "read_only_bind", "small_tmpfs"]

REPO = Path(__file__).resolve().parents[1]


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m dpledger.cli ARGV`` from this checkout, its output captured as text."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "dpledger.cli", *argv]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=120)


def _root(what: str) -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip(f"needs root to {what}")


def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs under ``tmp_path``, unmounted after."""
    _root("mount a small tmpfs")
    mnt = tmp_path / "small"
    mnt.mkdir()
    cmd = ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)]
    if subprocess.run(cmd, check=False).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def read_only_bind(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(a writable directory, a read-only bind mount of it), unmounted after."""
    _root("make a read-only bind mount")
    src, mnt = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    mnt.mkdir()
    if subprocess.run(["mount", "--bind", str(src), str(mnt)], check=False).returncode:
        pytest.skip("cannot bind-mount here")
    try:
        ro = ["mount", "-o", "remount,bind,ro", str(mnt)]
        if subprocess.run(ro, check=False).returncode:
            pytest.skip("cannot remount read-only here")
        yield src, mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
