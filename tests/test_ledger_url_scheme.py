"""A ledger target's URL scheme: case-insensitive for PostgreSQL, refused for any other.

``PostgreSQL://…`` (a scheme is case-insensitive, RFC 3986) was not recognised as a URL
and was opened as a relative SQLite path: ``ledger init`` created a directory-less file
named ``PostgreSQL:`` … or failed with an SQLite error. ``mysql://``/``sqlite:///`` did
the same. Now the PostgreSQL scheme is lowered for libpq, and any other ``scheme://`` is
a typed InvalidInput (exit 2) that never shows the rest of the URL (it may hold a
password) and creates nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger._files import postgres_url
from dpledger.cli.main import main
from dpledger.errors import InvalidInput
from dpledger.service.store import ServiceStore

POLICY = str(SPATIAL)
OTHERS = ["mysql://u:s3cretpw@h/db", "sqlite:///ledger.db", "HTTP://h/x", "file+x://y"]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("PostgreSQL://u@h/db", "postgresql://u@h/db"),
        ("POSTGRES://h", "postgres://h"),
        ("postgresql://h/d?x=PostgreSQL://", "postgresql://h/d?x=PostgreSQL://"),
        ("ledger.db", None),
        ("./mysql://x", None),  # a path that begins like a URL, written as ./
        ("dir/postgresql://x", None),
        ("C:/x.db", None),
        ("C://dir/x.db", None),  # a one-letter "scheme" is a drive, not a URL
    ],
)
def test_the_scheme_rule(text: str, want: str | None) -> None:
    assert postgres_url(text) == want


@pytest.mark.parametrize("url", OTHERS)
def test_another_scheme_is_refused_everywhere_and_creates_nothing(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    policy = dl.Policy.from_toml(Path(POLICY).read_text(), source="spatial")
    with pytest.raises(InvalidInput, match=r"is a \S+:// URL") as e:
        dl.Ledger.open(url, policy, mode="create")
    assert "s3cret" not in str(e.value)
    with pytest.raises(InvalidInput, match=r"is a \S+:// URL"):
        ServiceStore.open(url, create=True)
    for argv in (
        ["ledger", "init", "--policy", POLICY, "--ledger", url],
        ["ledger", "verify", "--policy", POLICY, "--ledger", url],
        ["plan", POLICY, "--cohort", "na=500", "--ledger", url],
    ):
        capsys.readouterr()
        assert main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert "URL" in err, err
        assert "s3cret" not in out + err
        assert "Traceback" not in err
    assert os.listdir(tmp_path) == []  # nothing created


@pytest.mark.postgres
def test_an_upper_case_postgresql_scheme_opens_the_server(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert pg_url.startswith("postgresql://")
    shouted = "PostgreSQL" + pg_url[len("postgresql") :]
    policy = dl.Policy.from_toml(Path(POLICY).read_text(), source="spatial")
    monkeypatch.chdir(tmp_path)  # restored after the test: others read relative paths
    with dl.Ledger.open(shouted, policy, mode="create") as ledger:
        assert ledger.init()
    with dl.Ledger.open(pg_url, policy, mode="read") as ledger:  # the same database
        assert ledger.verify().ok
    assert os.listdir(tmp_path) == []  # no SQLite file named "PostgreSQL:…"
    assert main(["ledger", "verify", "--policy", POLICY, "--ledger", shouted]) == 0


@pytest.mark.parametrize("name", ["nodir/", "sub/dir/", ".", "..", "sub/.", "/"])
def test_a_path_naming_a_directory_is_refused_and_creates_nothing(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ledger init --ledger nodir/`` said "created ledger nodir/" and made a file
    ``nodir`` (Path drops the slash), which ``verify --ledger nodir/`` then did not find."""
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    policy = dl.Policy.from_toml(Path(POLICY).read_text(), source="spatial")
    with pytest.raises(InvalidInput, match="names a directory"):
        dl.Ledger.open(name, policy, mode="create")
    with pytest.raises(InvalidInput, match="names a directory"):
        ServiceStore.open(name, create=True)
    for argv in (
        ["ledger", "init", "--policy", POLICY, "--ledger", name],
        ["demo", "--ledger", name],
    ):
        capsys.readouterr()
        assert main(argv) == 2, argv
        assert "names a directory" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["sub"]
    assert os.listdir(tmp_path / "sub") == []


def test_shown_location_drops_a_password_and_keeps_a_path() -> None:
    from dpledger._files import shown_location

    assert shown_location("postgresql://u:s3cret@h/db?password=x2&sslmode=require") == (
        "postgresql://u@h/db?sslmode=require"
    )
    assert shown_location("dir/ledger.db") == "dir/ledger.db"


@pytest.mark.postgres
def test_key_commands_never_print_the_ledger_urls_password(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``keys create`` quoted the raw ``--ledger`` URL (password included) when the
    ledger had no recorded policy; ``serve`` printed the key store's raw URL (review h38)."""
    url = pg_url.replace("postgresql://postgres@", "postgresql://postgres:s3cretpw@", 1)
    assert "s3cretpw" in url
    assert main(["ledger", "init", "--policy", POLICY, "--ledger", url]) == 0
    capsys.readouterr()
    argv = ["keys", "create", "--ledger", url, "--name", "ci", "--action", "check",
            "--region", "na", "--any-metric"]  # fmt: skip
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "has released nothing yet" in err
    assert "s3cretpw" not in out + err
