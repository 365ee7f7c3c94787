"""A PostgreSQL URL that libpq cannot parse must not have its password echoed in the
error: libpq quotes the whole URI (or the offending token) in its message, and the
password was only scrubbed after a successful parse."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg")

from factories import SPATIAL

from dpledger.cli.main import main

POLICY = str(SPATIAL)
URLS = [
    "postgresql://u:s3cretpw@[::1/x",  # unclosed IPv6 host: libpq quotes the URI
    "postgres://u:s3cret%zzpw@h/x",  # bad percent-encoding: libpq quotes the token
    "postgresql://u@[::1/x?password=s3cretpw",
]


@pytest.mark.parametrize("url", URLS)
def test_an_unparseable_url_never_shows_its_password(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["ledger", "verify", "--policy", POLICY, "--ledger", url],
                 ["ledger", "init", "--policy", POLICY, "--ledger", url]):  # fmt: skip
        capsys.readouterr()
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert "s3cret" not in out + err, err
        assert "PostgreSQL URL" in err
