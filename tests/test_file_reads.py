"""User-named files are read bounded: no device, FIFO or endless file gets in.

A policy, aggregate, request, held-out file or TLS file that is ``/dev/zero`` used to
grow the process to gigabytes (the size check trusted ``st_size``, 0 for a device); a
FIFO with no writer hung the command for ever. Now each is refused, unopened, with a
typed error (exit 2), and no read goes past the limit plus one byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger._files import read_bounded
from dpledger.cli.main import main
from dpledger.errors import InvalidInput, PolicyError
from dpledger.planning.clip import load_held_out
from dpledger.policy import Policy


def returns_quickly(fn: Callable[[], object], fifo: Path | None = None) -> None:
    """Run ``fn`` in a thread; fail if it is still running after 10 s (a blocked open)."""
    done = threading.Event()

    def run() -> None:
        try:
            fn()
        finally:
            done.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    if not done.wait(10) and fifo is not None:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # release the blocked reader
        pytest.fail(f"reading {fifo} blocked")
    assert done.is_set()


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    p = tmp_path / "pipe.json"
    os.mkfifo(p)
    return p


@pytest.fixture
def zero_link(tmp_path: Path) -> Path:
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    return link


def test_a_proc_file_that_claims_0_bytes_is_read_no_further_than_the_limit() -> None:
    # /proc files are regular, report st_size 0, and yet have contents: only the bounded
    # read (limit + 1 bytes) can tell that this one is too large
    with pytest.raises(InvalidInput, match="larger than 10 bytes"):
        read_bounded("/proc/self/maps", 10, InvalidInput)
    assert read_bounded("/proc/self/maps", 1 << 20, InvalidInput)


@pytest.mark.parametrize("path", ["/dev/zero", "zero_link"])
def test_a_policy_that_is_a_device_is_refused_unread(
    path: str, request: pytest.FixtureRequest
) -> None:
    target = request.getfixturevalue(path) if path == "zero_link" else Path(path)
    with pytest.raises(PolicyError, match="not a regular file"):
        Policy.load(target)


def test_a_policy_that_is_a_fifo_is_refused_without_blocking(fifo: Path) -> None:
    def load() -> None:
        with pytest.raises(PolicyError, match="not a regular file"):
            Policy.load(fifo)

    returns_quickly(load, fifo)


def test_held_out_values_from_a_device_or_fifo_are_refused(fifo: Path, tmp_path: Path) -> None:
    link = tmp_path / "zero.npy"
    link.symlink_to("/dev/zero")
    with pytest.raises(InvalidInput, match="not a regular file"):
        load_held_out(link)
    csv_fifo = tmp_path / "pipe.csv"
    os.mkfifo(csv_fifo)

    def load() -> None:
        with pytest.raises(InvalidInput, match="not a regular file"):
            load_held_out(csv_fifo)

    returns_quickly(load, csv_fifo)


@pytest.mark.parametrize("flag", ["--aggregate", "--request", "--policy"])
def test_cli_refuses_dev_zero_as_any_input_with_exit_2(
    flag: str, tmp_path: Path, zero_link: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "agg.json").write_text("1234.5")
    args = {
        "--policy": str(SPATIAL),
        "--ledger": str(tmp_path / "l.db"),
        "--aggregate": str(tmp_path / "agg.json"),
        "--epoch": "0",
        "--metric": "clipped_mean_loss",
        "--region": "eu-west",
        "--cohort": "2400",
    }
    args[flag] = str(zero_link)
    code = main(["release", *(x for kv in args.items() for x in kv)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "not a regular file" in err
    assert not (tmp_path / "l.db").exists()


def test_cli_refuses_a_fifo_aggregate_promptly(fifo: Path, tmp_path: Path) -> None:
    req = {"epoch": 0, "metric": "clipped_mean_loss", "region": "eu-west", "cohort": 2400}
    (tmp_path / "req.json").write_text(json.dumps(req))
    r = subprocess.run(
        [sys.executable, "-m", "dpledger.cli", "check", "--policy", str(SPATIAL),
         "--ledger", str(tmp_path / "l.db"), "--request", str(tmp_path / "req.json"),
         "--aggregate", str(fifo)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "not a regular file" in r.stderr


def test_calibrate_refuses_dev_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    link = tmp_path / "losses.csv"
    link.symlink_to("/dev/zero")
    code = main(["calibrate", "--held-out", str(link), "--epsilon", "1", "--cohort", "2000"])
    assert code == 2
    assert "not a regular file" in capsys.readouterr().err


def test_serve_refuses_a_fifo_tls_key_before_loading_it(
    fifo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("not a certificate")
    args = ["serve", "--policy", str(SPATIAL), "--ledger", str(tmp_path / "l.db"),
            "--tls-cert", str(cert), "--tls-key", str(fifo)]  # fmt: skip

    def serve() -> None:
        assert main(args) == 2

    returns_quickly(serve, fifo)
    assert "--tls-key" in capsys.readouterr().err
