"""``dpledger keys create|revoke|list`` and ``dpledger serve``: exit codes as the rest of
the CLI (0 ok, 2 bad input), one line of error and no traceback, a key shown exactly once,
and nothing created by a command that fails."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from _service import make_site

from dpledger.approval import ReleaseRequest
from dpledger.cli.main import main
from dpledger.ledger import Ledger
from dpledger.policy import Policy
from dpledger.service.store import ServiceStore, default_location


@pytest.fixture
def ledger(tmp_path: Path) -> str:
    site = make_site(str(tmp_path / "ledger.db"), tmp_path)
    return site.ledger


def create(ledger: str, *extra: str) -> list[str]:
    return ["keys", "create", "--ledger", ledger, "--name", "maps", *extra]


def test_a_key_is_printed_once_and_only_its_digest_is_stored(
    ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = str(Path(ledger).parent / "policy.toml")
    args = create(ledger, "--action", "release", "--region", "north", "--any-metric")
    assert main([*args, "--policy", policy]) == 0
    out, err = capsys.readouterr()
    token = out.strip()
    assert token.startswith("dpl_")
    assert "only time the key is shown" in err
    assert token not in err
    secret = token.split("_", 2)[2]
    store_file = Path(default_location(ledger))
    assert secret.encode() not in store_file.read_bytes()
    assert stat.S_IMODE(store_file.stat().st_mode) == 0o600
    assert main(["keys", "list", "--ledger", ledger, "--json"]) == 0
    listed = capsys.readouterr().out
    assert secret not in listed
    maps = [k for k in json.loads(listed) if k["name"] == "maps"]
    assert maps[0]["regions"] == ["north"]
    assert maps[0]["metrics"] is None
    with ServiceStore.open(default_location(ledger)) as store:
        assert store.key(token.split("_")[1]) is not None


def test_revoke_marks_the_key_and_an_unknown_id_exits_2(
    ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main(create(ledger, "--action", "read"))
    key_id = capsys.readouterr().out.strip().split("_")[1]
    assert main(["keys", "revoke", "--ledger", ledger, key_id]) == 0
    assert "revoked" in capsys.readouterr().out
    main(["keys", "list", "--ledger", ledger])
    line = next(x for x in capsys.readouterr().out.splitlines() if key_id in x)
    assert "  revoked 20" in line
    assert main(["keys", "revoke", "--ledger", ledger, "abcdefabcdef"]) == 2
    err = capsys.readouterr().err
    assert "no key with id" in err
    assert "Traceback" not in err
    main(create(ledger, "--action", "read", "--name", "ops"))
    other = capsys.readouterr().out.strip().split("_")[1]
    assert main(["keys", "revoke", "--ledger", ledger, other, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)  # as `keys list --json` shows a key
    assert (shown["key_id"], shown["name"]) == (other, "ops")
    assert shown["revoked_at"].startswith("20")
    assert main(["keys", "revoke", "--ledger", ledger, "abcdefabcdef", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"] == "unknown_resource"


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (("--action", "release", "--any-metric"), "--region"),
        (("--action", "check", "--any-region"), "--metric"),
        (("--action", "read", "--region", "north", "--any-region"), "not both"),
        # regions/metrics bind check and release only: listed, they would read as a limit
        (("--action", "read", "--region", "north"), "scope only check and release"),
        (("--action", "verify", "--action", "admin", "--any-metric"), "for verify, admin"),
        (("--action", "release", "--region", "west", "--any-metric", "--policy", "P"), "west"),
    ],
)
def test_a_key_that_may_spend_names_its_regions_and_metrics(
    ledger: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...],
    says: str,
) -> None:  # fmt: skip
    extra = tuple(str(tmp_path / "policy.toml") if x == "P" else x for x in extra)
    before = Path(default_location(ledger)).read_bytes()
    assert main(create(ledger, *extra)) == 2
    err = capsys.readouterr().err
    assert says in err
    assert "Traceback" not in err
    assert Path(default_location(ledger)).read_bytes() == before


def test_names_are_checked_against_the_ledgers_recorded_policy_without_policy(
    ledger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    named = create(ledger, "--action", "release", "--region", "north", "--metric", "loss")
    before = Path(default_location(ledger)).read_bytes()
    assert main(named) == 2  # nothing released yet: no recorded policy to check against
    err = capsys.readouterr().err
    assert "pass --policy FILE" in err
    assert "Traceback" not in err
    assert Path(default_location(ledger)).read_bytes() == before
    assert main(create(ledger, "--action", "release", "--any-region", "--any-metric")) == 0
    capsys.readouterr()
    site = Path(ledger).parent / "policy.toml"
    with Ledger.open(ledger, Policy.load(site)) as opened:
        opened.release(ReleaseRequest(epoch=0, metric="loss", region="north", cohort=1000), 800.0)
    bogus = create(ledger, "--action", "release", "--region", "nowhere", "--metric", "nometric")
    before = Path(default_location(ledger)).read_bytes()
    assert main(bogus) == 2
    err = capsys.readouterr().err
    assert "not in the ledger's recorded policy" in err
    assert "'nowhere', 'nometric'" in err
    assert "Traceback" not in err
    assert Path(default_location(ledger)).read_bytes() == before
    assert main(named) == 0  # known names pass against the recorded policy


@pytest.mark.postgres
def test_names_are_checked_against_a_postgresql_ledgers_recorded_policy(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = make_site(pg_url, tmp_path)
    with Ledger.open(pg_url, site.policy) as opened:
        opened.release(ReleaseRequest(epoch=0, metric="loss", region="north", cohort=1000), 800.0)
    assert main(create(pg_url, "--action", "check", "--region", "nowhere", "--any-metric")) == 2
    assert "not in the ledger's recorded policy" in capsys.readouterr().err
    assert main(create(pg_url, "--action", "check", "--region", "north", "--any-metric")) == 0


@pytest.mark.parametrize("what", ["empty", "directory"])
def test_key_commands_refuse_and_leave_an_unusable_key_store_as_it_was(
    ledger: str, tmp_path: Path, what: str, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "e.keys"
    if what == "empty":
        keys.touch(mode=0o644)
    else:
        keys.mkdir()
    mode = keys.stat().st_mode
    says = "empty file (0 bytes), not a dpledger key store" if what == "empty" else "directory"
    policy = str(tmp_path / "policy.toml")
    at = ["--ledger", ledger, "--keys", str(keys)]
    for argv in (
        ["keys", "list", *at],
        ["keys", "revoke", *at, "abcdefabcdef"],
        ["keys", "create", *at, "--name", "maps", "--action", "read"],
        ["serve", *at, "--policy", policy, "--port", "0"],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert says in err
        assert "Traceback" not in err
        assert keys.stat().st_mode == mode
        if what == "empty":
            assert keys.read_bytes() == b""  # never a header written into it
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("e.keys")) == ["e.keys"]


def test_keys_for_a_missing_ledger_create_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo.db"
    assert main(create(str(missing), "--action", "read")) == 2
    assert "no ledger at" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_serve_refuses_a_missing_ledger_or_key_store_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = make_site(str(tmp_path / "ledger.db"), tmp_path)
    policy = str(site.policy_path)
    typo = tmp_path / "typo.db"
    assert main(["serve", "--ledger", str(typo), "--policy", policy, "--port", "0"]) == 2
    assert "no ledger at" in capsys.readouterr().err  # the ledger, not its key store
    assert not typo.exists()
    no_keys = ["--keys", str(tmp_path / "none.keys.db")]
    assert main(["serve", "--ledger", site.ledger, "--policy", policy, *no_keys]) == 2
    err = capsys.readouterr().err
    assert "dpledger keys create" in err
    assert "Traceback" not in err
    assert not (tmp_path / "none.keys.db").exists()
    assert main(["serve", "--ledger", site.ledger, "--policy", policy, "--tls-cert", "c"]) == 2
    assert "--tls-key" in capsys.readouterr().err


@pytest.mark.parametrize("port", ["65536", "99999", "-1"])
def test_serve_refuses_a_port_out_of_range_rather_than_wrapping_it(
    ledger: str, port: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = str(tmp_path / "policy.toml")
    assert main(["serve", "--ledger", ledger, "--policy", policy, "--port", port]) == 2
    err = capsys.readouterr().err
    assert "--port must lie in [0, 65535]" in err
    assert "serving" not in err


def test_serve_refuses_an_unusable_certificate_before_it_serves(
    ledger: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = str(tmp_path / "policy.toml")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    tls = ["--tls-cert", str(junk), "--tls-key", str(junk)]
    assert main(["serve", "--ledger", ledger, "--policy", policy, "--port", "0", *tls]) == 2
    err = capsys.readouterr().err
    assert "cannot use --tls-cert" in err
    assert "serving" not in err
    assert "internal error" not in err
    assert "Traceback" not in err
