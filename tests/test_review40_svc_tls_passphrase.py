"""Review 40 (service): an encrypted TLS key's passphrase is asked for once, not twice.

``serve`` loads the certificate and key before binding (a bad one is exit 2), and uvicorn
then loaded them again: with an encrypted key OpenSSL prompted for the passphrase twice
(the second time after "serving … at https://…" was printed, so a wrong second answer
crashed a server that had announced itself). The passphrase read by the first load is
now handed to uvicorn. Driven through a pseudo-terminal, as a person would type it.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from _service import Site

PASS = b"correct horse"
pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def _pem(tmp: Path) -> tuple[Path, Path]:
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-keyout", str(key), "-out",
         str(cert), "-days", "2", "-subj", "/CN=localhost", "-passout", "pass:" + PASS.decode()],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_an_encrypted_key_is_asked_for_once(site: Site, tmp_path: Path) -> None:
    import pty

    cert, key = _pem(tmp_path)
    args = [sys.executable, "-m", "dpledger.cli", "serve", "--ledger", site.ledger,
            "--policy", str(site.policy_path), "--port", "0", "--log-level", "warning",
            "--tls-cert", str(cert), "--tls-key", str(key)]  # fmt: skip
    pid, fd = pty.fork()
    if pid == 0:  # the child: only exec
        os.execv(sys.executable, args)
    out, answered, url = b"", 0, ""
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not url:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    out += os.read(fd, 4096)
                except OSError:
                    break
            if out.count(b"pass phrase") > answered:
                answered += 1
                os.write(fd, PASS + b"\n")
            if b"https://" in out and b"Ctrl-C" in out:
                url = out.split(b"at ", 1)[1].split(b"/ ", 1)[0].decode()
        assert url, out.decode(errors="replace")
        context = ssl.create_default_context(cafile=str(cert))
        context.check_hostname = False
        for _ in range(100):  # the port is bound before the app has started
            try:
                with urllib.request.urlopen(url + "/v1/health", context=context) as r:
                    assert r.status == 200
                    break
            except OSError:
                time.sleep(0.1)
                if select.select([fd], [], [], 0)[0]:
                    out += os.read(fd, 4096)
                    if out.count(b"pass phrase") > answered:
                        answered += 1
                        os.write(fd, PASS + b"\n")
        else:
            pytest.fail(out.decode(errors="replace"))
        assert out.count(b"pass phrase") == 1, out.decode(errors="replace")
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        os.close(fd)


def test_a_wrong_passphrase_is_exit_2_before_any_bind(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dpledger.cli.main import main

    cert, key = _pem(tmp_path)
    monkeypatch.setattr("getpass.getpass", lambda prompt="": "wrong")
    code = main(["serve", "--ledger", site.ledger, "--policy", str(site.policy_path),
                 "--port", "0", "--tls-cert", str(cert), "--tls-key", str(key)])  # fmt: skip
    assert code == 2
    assert "cannot use --tls-cert" in capsys.readouterr().err
