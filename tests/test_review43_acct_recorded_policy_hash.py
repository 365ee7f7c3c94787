"""Review 44 (acct): an epoch bound to an earlier policy version is read under that
version's recorded body (:meth:`Ledger.epoch_policy`), but the body was parsed without
checking it against the content hash it is recorded (and every entry names it) under.
An edited body — ``epoch_epsilon`` raised from 4 to 400 in the stored JSON — was taken
as the epoch's policy: ``Ledger.remaining`` and ``dpledger ledger show`` printed the
epoch's budget from it (999/10 left where 9/10 is), with no sign of damage, while
``verify`` names the same body edited. A read of a damaged ledger is refused (exit 2)."""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path

import pytest

import dpledger as dl
from dpledger.cli.main import main
from dpledger.errors import LedgerCorrupted

POLICY = """
name = "u"
version = "{v}"
neighbouring = "replace"
epoch_epsilon = "{eps}"
[regions]
names = ["north", "south"]
[metrics.loss]
kind = "scalar_mean"
epsilon = "0.1"
clip = {{ low = "0", high = "1", source = "t" }}
"""


def test_an_edited_recorded_policy_body_is_not_read_as_the_epochs_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1, v2 = tmp_path / "v1.toml", tmp_path / "v2.toml"
    v1.write_text(POLICY.format(v="1", eps="4"))
    v2.write_text(POLICY.format(v="2", eps="8"))
    db = tmp_path / "l.db"
    req = dl.ReleaseRequest(epoch=0, metric="loss", region="north", cohort=9)
    with dl.Ledger.open(str(db), dl.Policy.load(v1), mode="create") as ledger:
        ledger.release(req, 5.0)
        v1_hash = ledger.policy.content_hash
    with sqlite3.connect(db) as conn:  # no trigger guards the policies table's bodies
        (body,) = conn.execute(
            "SELECT body FROM dpl_policies WHERE hash = ?", (v1_hash,)
        ).fetchone()
        assert '"epoch_epsilon": "4"' in body
        edited = body.replace('"epoch_epsilon": "4"', '"epoch_epsilon": "400"')
        conn.execute("UPDATE dpl_policies SET body = ? WHERE hash = ?", (edited, v1_hash))
    conn.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        with dl.Ledger.open(str(db), dl.Policy.load(v2), mode="read") as ledger:
            assert not ledger.verify().ok  # the audit sees the edit …
            with pytest.raises(LedgerCorrupted):  # … and the budget view must not read it
                ledger.remaining(0, "north")
        code = main(["ledger", "show", "--ledger", str(db), "--policy", str(v2)])
    out, err = capsys.readouterr()
    assert "999/10" not in out
    assert code == 2, out
    assert "edited" in err or "content hash" in err, err


@pytest.mark.postgres
def test_postgres_refuses_the_edited_body_too(pg_url: str) -> None:
    import psycopg

    v1 = dl.Policy.from_toml(POLICY.format(v="1", eps="4"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        v2 = dl.Policy.from_toml(POLICY.format(v="2", eps="8"))
    with dl.Ledger.open(pg_url, v1, mode="create") as ledger:
        ledger.release(dl.ReleaseRequest(epoch=0, metric="loss", region="north", cohort=9), 5.0)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE dpl_policies SET body = replace(body, %s, %s) WHERE hash = %s",
            ('"epoch_epsilon": "4"', '"epoch_epsilon": "400"', v1.content_hash),
        )
    with dl.Ledger.open(pg_url, v2, mode="read") as ledger:
        assert not ledger.verify().ok
        with pytest.raises(LedgerCorrupted):
            ledger.remaining(0, "north")


def test_keys_create_refuses_names_checked_against_an_edited_recorded_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``keys create`` without ``--policy`` checks a key's names against the ledger's
    recorded policy: an edited body (a region added) is damage there too, never the list
    of names a key may be scoped to."""
    path = tmp_path / "v1.toml"
    path.write_text(POLICY.format(v="1", eps="4"))
    db = tmp_path / "l.db"
    req = dl.ReleaseRequest(epoch=0, metric="loss", region="north", cohort=9)
    with dl.Ledger.open(str(db), dl.Policy.load(path), mode="create") as ledger:
        ledger.release(req, 5.0)
        digest = ledger.policy.content_hash
    with sqlite3.connect(db) as conn:
        (body,) = conn.execute("SELECT body FROM dpl_policies WHERE hash = ?", (digest,)).fetchone()
        edited = body.replace('"north", "south"', '"north", "south", "west"')
        assert edited != body
        conn.execute("UPDATE dpl_policies SET body = ? WHERE hash = ?", (edited, digest))
    conn.close()
    keys = str(tmp_path / "k.db")
    argv = ["keys", "create", "--ledger", str(db), "--keys", keys, "--name", "w",
            "--action", "release", "--region", "west", "--metric", "loss"]  # fmt: skip
    assert main(argv) == 2
    assert "does not match its content hash" in capsys.readouterr().err
    assert not (tmp_path / "k.db").exists()
