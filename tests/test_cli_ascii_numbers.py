"""Every number option of the CLI takes ASCII digits only (audit 2, finding 10).

argparse's ``int`` read ``--epoch ٣`` as epoch 3 and ``--cohort ２４００`` as 2400 (and
``float`` read ``--epsilon ١`` as 1.0), while ``plan --cohort`` and policies take ASCII
only. Each such value is now a usage error: exit 2, naming the option, no traceback, and
nothing is run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
from factories import SPATIAL

from dpledger.cli.argtypes import ascii_float, ascii_fraction, ascii_int
from dpledger.cli.main import main

NOT_ASCII_INTS = ["٣", "２４００", "2_400", " 3", "3 ", "+3", "३", "1" * 31, ""]
NOT_ASCII_FLOATS = ["١", "０.５", "1_0", "inf", "nan", " 1", "1e99999", "0x10"]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's usage error
        code = int(e.code or 0)
    return code, capsys.readouterr().err


@pytest.fixture
def where(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "a.json").write_text("1800.0")
    np.save(tmp_path / "h.npy", np.linspace(0.0, 3.0, 100))
    return {
        "db": str(tmp_path / "L.db"),
        "agg": str(tmp_path / "a.json"),
        "held": str(tmp_path / "h.npy"),
        "missing": str(tmp_path / "missing.toml"),
    }


def _commands(w: dict[str, str], v: str) -> dict[str, list[str]]:
    """One command line per integer or number option, with ``v`` as its value."""
    at = ["--policy", str(SPATIAL), "--ledger", w["db"]]
    req = ["--metric", "clipped_mean_loss", "--region", "eu-west", "--aggregate", w["agg"]]
    cal = ["calibrate", "--held-out", w["held"]]
    serve = ["serve", "--ledger", w["db"], "--policy", w["missing"]]
    return {
        "check --epoch": ["check", *at, *req, "--cohort", "2400", "--epoch", v],
        "check --cohort": ["check", *at, *req, "--epoch", "0", "--cohort", v],
        "release --epoch": ["release", *at, *req, "--cohort", "2400", "--epoch", v],
        "release --cohort": ["release", *at, *req, "--epoch", "0", "--cohort", v],
        "plan --rounds": ["plan", str(SPATIAL), "--cohort", "eu-west=2400", "--rounds", v],
        "plan --epoch": ["plan", str(SPATIAL), "--cohort", "eu-west=2400", "--epoch", v],
        "calibrate --cohort": [*cal, "--epsilon", "1", "--cohort", v],
        "demo --clients": ["demo", "--ledger", w["db"], "--clients", v],
        "demo --seed": ["demo", "--ledger", w["db"], "--clients", "0", "--seed", v],
        "serve --port": [*serve, "--port", v],
        "serve --connections": [*serve, "--connections", v],
        "serve --max-body-bytes": [*serve, "--max-body-bytes", v],
    }


FLOAT_OPTIONS = ("calibrate --epsilon", "calibrate --low", "ledger lifetime --delta")


def _float_commands(w: dict[str, str], v: str) -> dict[str, list[str]]:
    cal = ["calibrate", "--held-out", w["held"], "--cohort", "2000"]
    return {
        "calibrate --epsilon": [*cal, "--epsilon", v],
        "calibrate --low": [*cal, "--epsilon", "1", "--low", v],
        "ledger lifetime --delta": [
            "ledger", "lifetime", "--policy", str(SPATIAL), "--ledger", w["db"], "--delta", v,
        ],
    }  # fmt: skip


INT_OPTIONS = tuple(_commands({k: "" for k in ("db", "agg", "held", "missing")}, "0"))


@pytest.mark.parametrize("option", INT_OPTIONS)
@pytest.mark.parametrize("value", ["٣", "２４００"])
def test_an_integer_option_in_other_digits_is_a_usage_error(
    option: str, value: str, where: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(_commands(where, value)[option], capsys)
    assert code == 2, err
    assert f"argument {option.split()[1]}" in err
    assert "ASCII digits" in err
    assert "Traceback" not in err
    assert not Path(where["db"]).exists()  # nothing ran: no ledger was created


@pytest.mark.parametrize("option", FLOAT_OPTIONS)
@pytest.mark.parametrize("value", ["١", "٠.٥"])
def test_a_number_option_in_other_digits_is_a_usage_error(
    option: str, value: str, where: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(_float_commands(where, value)[option], capsys)
    assert code == 2, err
    assert f"argument {option.split()[-1]}" in err
    assert "plain ASCII decimal" in err


@pytest.mark.parametrize("option", FLOAT_OPTIONS)
@pytest.mark.parametrize(("value", "why"), [("1e-400", "too small"), ("1e400", "too large")])
def test_a_number_a_double_cannot_hold_is_refused_as_typed(
    option: str, value: str, why: str, where: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--delta 1e-400`` said "delta must be a number in (0, 1), got 0.0": the underflowed
    double, not what was typed (audit 3, finding 9)."""
    code, err = _run(_float_commands(where, value)[option], capsys)
    assert code == 2, err
    assert f"argument {option.split()[-1]}: {value!r} is {why} for a double" in err
    assert "got 0.0" not in err
    assert "Traceback" not in err
    assert not Path(where["db"]).exists()


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("0.99999999999999999", "'0.99999999999999999' (it rounds to 1 in double precision)"),
        ("1e-400", "'1e-400' is too small for a double"),
        ("1", "strictly between 0 and 1, got '1'"),
        ("0", "strictly between 0 and 1, got '0'"),
        ("-0.5", "strictly between 0 and 1, got '-0.5'"),
    ],
)
def test_delta_outside_0_1_as_a_double_is_refused_naming_the_text(
    value: str, shown: str, where: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(_float_commands(where, value)["ledger lifetime --delta"], capsys)
    assert code == 2, err
    assert "argument --delta: " in err
    assert shown in err
    assert "Traceback" not in err
    assert not Path(where["db"]).exists()


@pytest.mark.parametrize("value", ["50,1e400", "50,٩٩"])
def test_a_percentile_is_read_as_the_other_number_options(
    value: str, where: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*_float_commands(where, "1")["calibrate --epsilon"], "--percentiles", value]
    code, err = _run(argv, capsys)
    assert code == 2, err
    assert f"--percentiles {value!r}: " in err
    assert f"got {value.split(',')[1]!r}" in err or f"{value.split(',')[1]!r} is too large" in err
    assert "Traceback" not in err


def test_the_smallest_doubles_and_zero_still_read() -> None:
    assert ascii_float("0e-400") == 0.0
    assert ascii_float("-0.000") == 0.0
    assert ascii_float("5e-324") == 5e-324  # the smallest subnormal: not 0
    with pytest.raises(argparse.ArgumentTypeError, match="'-2e-999' is too small"):
        ascii_float("-2e-999")
    assert ascii_fraction("1e-300") == 1e-300
    assert ascii_fraction("0.9999999999999999") == 0.9999999999999999


def test_verify_expected_head_takes_an_ascii_entry_id(
    where: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    at = ["--policy", str(SPATIAL), "--ledger", where["db"]]
    assert main(["ledger", "init", *at]) == 0
    code, err = _run(["ledger", "verify", *at, "--expected-head", "٠:" + "0" * 64], capsys)
    assert code == 2
    assert "--expected-head takes ENTRY_ID:HASH" in err


@pytest.mark.parametrize("text", NOT_ASCII_INTS)
def test_ascii_int_refuses_all_but_ascii_digits(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="ASCII digits"):
        ascii_int(text)


@pytest.mark.parametrize("text", NOT_ASCII_FLOATS)
def test_ascii_float_refuses_all_but_a_plain_decimal(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="plain ASCII decimal"):
        ascii_float(text)


def test_ascii_numbers_still_read_as_before() -> None:
    assert [ascii_int(t) for t in ("0", "2400", "-1", "007")] == [0, 2400, -1, 7]
    got = [ascii_float(t) for t in ("1", "0.5", "-2", "1e-6", "2.5E3", ".5", "5.")]
    assert got == [1.0, 0.5, -2.0, 1e-6, 2500.0, 0.5, 5.0]


@pytest.mark.parametrize(
    ("option", "reason"),
    [
        ("calibrate --epsilon", "epsilon must be finite and > 0, got -1e+308"),
        ("calibrate --low", "low must lie within ±1e12"),
        ("ledger lifetime --delta", "strictly between 0 and 1, got '-1e308'"),
    ],
)
def test_a_negative_number_with_an_exponent_reaches_its_option(
    option: str, reason: str, where: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Audit 5, F8: ``--low -1e308`` was argparse's "expected one argument" (it read
    ``-1e308`` as an option); only ``--low=-1e308`` worked."""
    code, err = _run(_float_commands(where, "-1e308")[option], capsys)
    assert code == 2, err
    assert "expected one argument" not in err
    assert reason in err


def test_a_negative_low_with_an_exponent_calibrates(
    where: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(_float_commands(where, "-2.5E-1")["calibrate --low"], capsys)
    assert code == 0, err


def test_every_number_option_takes_a_negative_number_with_an_exponent() -> None:
    """The options joined to a following ``-1e5`` are every option typed as a number."""
    from dpledger.cli.argtypes import NUMBER_OPTIONS, join_negative_numbers
    from dpledger.cli.main import build_parser

    typed: set[str] = set()
    parsers = [build_parser()]
    while parsers:
        parser = parsers.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
            elif action.type in (ascii_float, ascii_fraction):
                typed.update(action.option_strings)
    assert typed == NUMBER_OPTIONS
    assert join_negative_numbers(["--low", "-1e5", "--json", "-2", "--low", "x"]) == [
        "--low=-1e5", "--json", "-2", "--low", "x",
    ]  # fmt: skip
