"""Review 39 (service): two SQLite ledgers whose default key stores are one file.

The key store's default location is the ledger's name with its last suffix replaced by
``.keys.db``, so the ledgers ``eval.v1`` and ``eval.v2`` (or ``eval.2025``/``eval.2026``,
``L.sqlite``/``L.sqlite3``) both keep their keys in ``eval.keys.db``. A key an operator
created for one ledger, in that ledger's scopes, then spent on the other ledger's
service, and revoking or listing keys of one acted on both. A key store made at a
ledger's default location now records that ledger's file name, and any other ledger
that maps to it is refused (exit 2, nothing written) until it is given a ``--keys`` of
its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _service import body, call
from factories import policy_text

from dpledger.cli.main import main
from dpledger.errors import InvalidInput
from dpledger.ledger import Ledger
from dpledger.policy import Policy
from dpledger.service import Settings, create_app
from dpledger.service.store import ServiceStore, default_location


def _ledger(path: Path, policy: Policy) -> str:
    with Ledger.open(str(path), policy, mode="create") as made:
        made.init()
    return str(path)


@pytest.mark.parametrize(("first", "second"), [("eval.v1", "eval.v2"), ("L.sqlite", "L.sqlite3")])
def test_a_key_made_for_one_ledger_does_not_open_another_ledgers_service(
    tmp_path: Path, first: str, second: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = policy_text()
    (tmp_path / "policy.toml").write_text(text)
    policy = Policy.from_toml(text, source="policy.toml")
    one, two = _ledger(tmp_path / first, policy), _ledger(tmp_path / second, policy)
    assert default_location(one) == default_location(two)  # the shared default path
    create = ["keys", "create", "--name", "team-one", "--action", "release"]
    scope = ["--region", "north", "--metric", "loss", "--policy", str(tmp_path / "policy.toml")]
    assert main([*create, *scope, "--ledger", one]) == 0
    token = capsys.readouterr().out.strip()
    store = Path(default_location(one))
    kept = store.read_bytes()

    with pytest.raises(InvalidInput, match="--keys"):  # serve for the other ledger
        create_app(Settings(ledger=two, policy=policy))
    argv = ["serve", "--ledger", two, "--policy", str(tmp_path / "policy.toml"), "--port", "0"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--keys" in err
    assert "Traceback" not in err
    assert main([*create, *scope, "--ledger", two]) == 2  # nor adds keys for it there
    assert main(["keys", "list", "--ledger", two]) == 2
    capsys.readouterr()
    assert store.read_bytes() == kept

    # the first ledger's own service still opens it, and the key spends there
    app = create_app(Settings(ledger=one, policy=policy))
    try:
        headers = {"Authorization": f"Bearer {token}"}
        assert call(app, "POST", "/v1/releases", json=body(), headers=headers).status_code == 201
    finally:
        app.state.service.close()

    # given a key store of its own, the second ledger serves (and the first key is unknown)
    own = str(tmp_path / "two-keys.db")
    assert main([*create, *scope, "--ledger", two, "--keys", own]) == 0
    capsys.readouterr()
    app = create_app(Settings(ledger=two, policy=policy, keys=own))
    try:
        headers = {"Authorization": f"Bearer {token}"}
        assert call(app, "POST", "/v1/releases", json=body(), headers=headers).status_code == 401
    finally:
        app.state.service.close()


def test_a_store_made_before_it_recorded_its_ledger_is_claimed_by_the_next_keys_create(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = policy_text()
    (tmp_path / "policy.toml").write_text(text)
    policy = Policy.from_toml(text, source="policy.toml")
    one = _ledger(tmp_path / "eval.v1", policy)
    two = _ledger(tmp_path / "eval.v2", policy)
    with ServiceStore.open(default_location(one), create=True):  # as an older dpledger made it
        pass
    create = ["keys", "create", "--name", "team", "--action", "read"]
    assert main([*create, "--ledger", one]) == 0  # claims it for eval.v1
    assert main([*create, "--ledger", two]) == 2
    assert "--keys" in capsys.readouterr().err
    with pytest.raises(InvalidInput, match=r"eval\.v1"):
        create_app(Settings(ledger=two, policy=policy))
