"""``--json`` output is strict JSON: an error bar that overflows a double is ``null`` (as
the service answers), never the token ``Infinity`` that no JSON parser accepts; the
text output still says ``inf``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpledger.cli.main import main
from dpledger.cli.output import json_text

TINY = """
name = "tiny"
version = "1"
neighbouring = "replace"
epoch_epsilon = "4"
eval_fraction = "0.25"
allocation = "pooled"

[regions]
names = ["north"]

[metrics.tinyeps]
kind = "scalar_mean"
epsilon = "1e-305"  # scale 1e305: within the noise_range check (3e-307 is refused now)
clip = { low = "0", high = "1", source = "test" }
"""


def _strict(text: str) -> object:
    def refuse(token: str) -> object:
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_an_overflowed_error_bar_is_null_in_json_and_inf_in_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text(TINY)
    (tmp_path / "one.json").write_text("1")
    base = ["release", "--policy", str(policy), "--ledger", str(tmp_path / "l.db"),
            "--metric", "tinyeps", "--region", "north", "--cohort", "1",
            "--aggregate", str(tmp_path / "one.json"),
            "--aggregate-error", "1.7976931348623157e308"]  # fmt: skip
    capsys.readouterr()
    assert main([*base, "--epoch", "1", "--json"]) == 0
    out = _strict(capsys.readouterr().out)
    assert isinstance(out, dict)
    assert out["error_bar"] is None
    assert out["entry_id"] == 1
    assert main([*base, "--epoch", "2"]) == 0
    assert "inf" in capsys.readouterr().out


def test_json_text_turns_every_non_finite_float_into_null() -> None:
    data = {"a": [1.0, float("inf"), (float("nan"), -float("inf"))], "b": {"c": 2}}
    assert _strict(json_text(data)) == {"a": [1.0, None, [None, None]], "b": {"c": 2}}
