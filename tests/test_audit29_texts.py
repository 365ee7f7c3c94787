"""Audit s29, F10: messages that named the wrong thing or left out what to do.

A float that underflowed to 0.0, a policy file with a byte order mark, an ``.npy`` file
named otherwise, an oversized or null-holding aggregate, an empty ledger path, the
lifetime of region ``*`` and a δ printed as 1, a numpy ``limit``, an empty percentile,
a regression codec's underflowing bounds, and a request's policy version against the
policy given. Each refusal is a typed error (or CLI exit 2 / a refused verdict).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dpledger import InvalidInput, Ledger, Policy, PolicyError, ReleaseRequest
from dpledger.cli.main import MAX_AGGREGATE_VALUES, main
from dpledger.metrics.flam_regression import regression_codec

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "policies" / "spatial-eval.toml"
EPOCH_LINE = 'epoch_epsilon = "4.0"'


def _policy_text(epoch_line: str) -> str:
    text = POLICY.read_text(encoding="utf-8")
    assert EPOCH_LINE in text
    return text.replace(EPOCH_LINE, epoch_line)


def _request(tmp_path: Path, **fields: object) -> Path:
    body = {"epoch": 0, "metric": "clipped_mean_loss", "region": "eu-west", "cohort": 2400}
    path = tmp_path / "req.json"
    path.write_text(json.dumps({**body, **fields}), encoding="utf-8")
    return path


def _check(tmp_path: Path, request: Path, aggregate: Path, policy: Path = POLICY) -> list[str]:
    ledger = str(tmp_path / "l.db")
    return ["check", "--policy", str(policy), "--ledger", ledger,
            "--request", str(request), "--aggregate", str(aggregate)]  # fmt: skip


def test_1_a_float_that_underflowed_to_zero_says_so(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(_policy_text("epoch_epsilon = 1e-400"), encoding="utf-8")
    with pytest.raises(PolicyError, match="epoch_epsilon") as e:
        Policy.load(path)
    text = str(e.value)
    assert "must be > 0" in text
    assert "underflowed to 0.0" in text
    assert "1e-400" in text
    assert "larger value" in text
    # the string form keeps its own text; a plain 0 does not speak of underflow
    path.write_text(_policy_text('epoch_epsilon = "1e-400"'), encoding="utf-8")
    with pytest.raises(PolicyError, match="smallest normal double"):
        Policy.load(path)
    path.write_text(_policy_text("epoch_epsilon = 0"), encoding="utf-8")
    with pytest.raises(PolicyError, match="must be > 0") as e:
        Policy.load(path)
    assert "underflow" not in e.value.problem


def test_2_a_policy_file_with_a_byte_order_mark_loads_with_the_same_hash(tmp_path: Path) -> None:
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + POLICY.read_bytes())
    with_bom, without = Policy.load(path), Policy.load(POLICY)
    assert with_bom.content_hash == without.content_hash
    text = "\ufeff" + POLICY.read_text(encoding="utf-8")
    assert Policy.from_toml(text).content_hash == without.content_hash


@pytest.mark.parametrize("name", ["F.NPY", "x.dat", "x.json"])
def test_3_an_npy_file_under_another_name_is_named_as_one(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    npy = tmp_path / name
    with npy.open("wb") as f:
        np.save(f, np.array(100.0))
    assert main(_check(tmp_path, _request(tmp_path), npy)) == 2
    err = capsys.readouterr().err
    assert "this is an .npy file" in err
    assert "name it with the .npy suffix" in err
    assert "0x93" not in err
    assert "Traceback" not in err
    assert main(_check(tmp_path, npy, npy)) == 2  # as a request: a request is JSON
    err = capsys.readouterr().err
    assert "cannot read request" in err
    assert "this is an .npy file" in err


def test_4_too_many_values_and_a_null_say_the_limit_and_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "big.json"
    big.write_text(json.dumps([0.0] * 200_000), encoding="utf-8")
    assert main(_check(tmp_path, _request(tmp_path), big)) == 2
    err = capsys.readouterr().err
    assert "200,000 values" in err
    assert f"{MAX_AGGREGATE_VALUES:,}" in err
    assert "one metric's aggregate" in err
    _one_release(tmp_path)  # check reads an existing ledger
    null = tmp_path / "null.json"
    null.write_text("[1.0, null]", encoding="utf-8")
    assert main(_check(tmp_path, _request(tmp_path), null)) == 1  # refused, as before
    out = capsys.readouterr().out
    assert "aggregate_dtype" in out
    assert "a null (None) is not a number" in out


def test_5_an_empty_ledger_path_is_named_as_such() -> None:
    policy = Policy.load(POLICY)
    for mode in ("read", "write", "create"):
        with pytest.raises(InvalidInput, match="the ledger path is empty"):
            Ledger.open("", policy, mode=mode)  # type: ignore[arg-type]


def _one_release(tmp_path: Path) -> str:
    db = str(tmp_path / "l.db")
    with Ledger.open(db, Policy.load(POLICY), mode="create") as ledger:
        for epoch in range(4):
            rq = ReleaseRequest(epoch=epoch, metric="clipped_mean_loss", region="na", cohort=2400)
            ledger.release(rq, 100.0)
    return db


def test_6_lifetime_names_the_worst_region_and_prints_delta_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _one_release(tmp_path)
    argv = ["ledger", "lifetime", "--policy", str(POLICY), "--ledger", db]
    assert main([*argv, "--delta", "0.9999999"]) == 0
    out = capsys.readouterr().out
    assert "in the worst region of each epoch" in out
    assert "region *" not in out
    assert "δ = 0.9999999" in out
    assert "δ = 1)" not in out
    assert main([*argv, "--region", "na"]) == 0
    out = capsys.readouterr().out
    assert "a client of region na over 4 releases" in out
    assert "δ = 1e-06" in out


def test_7_entries_take_numpy_integers_not_bools(tmp_path: Path) -> None:
    db = _one_release(tmp_path)
    with Ledger.open(db, Policy.load(POLICY), mode="read") as ledger:
        assert len(ledger.entries(limit=np.int64(3))) == 3  # type: ignore[arg-type]
        assert len(ledger.entries(after=np.uint8(1), limit=np.int32(9))) == 3  # type: ignore[arg-type]
        for bad in (np.bool_(True), True, 2.0):
            with pytest.raises(InvalidInput, match="limit must be an integer"):
                ledger.entries(limit=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "item"), [("50,,90", "item 2 of 3"), ("50,90,", "item 3 of 3")])
def test_8_an_empty_percentile_is_refused(
    value: str, item: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    held = tmp_path / "h.csv"
    held.write_text("loss\n1.0\n2.0\n3.0\n", encoding="utf-8")
    argv = ["calibrate", "--held-out", str(held), "--epsilon", "1", "--cohort", "2000",
            "--percentiles", value]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--percentiles {value!r}: {item} is empty" in err
    assert "Traceback" not in err


def test_9_regression_codec_names_the_arguments_whose_squares_underflow() -> None:
    with pytest.raises(InvalidInput) as e:
        regression_codec(y_bounds=(0.0, 1e-300), residual_bound=1e-300, max_samples=10, cap=1.0)
    text = str(e.value)
    assert "residual_bound squared underflows to 0" in text
    assert "y_bounds" in text
    with pytest.raises(InvalidInput, match=r"y_bounds \(about the shift\) squared overflows"):
        regression_codec(y_bounds=(0.0, 1e200), residual_bound=1.0, max_samples=10, cap=1.0)
    regression_codec(y_bounds=(0.0, 1.0), residual_bound=1.0, max_samples=10, cap=1.0)


def test_10_a_request_policy_version_is_told_apart_from_the_policy_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _one_release(tmp_path)  # recorded under 1.0.0
    v2 = tmp_path / "v2.toml"
    v2.write_text(
        POLICY.read_text(encoding="utf-8").replace('version = "1.0.0"', 'version = "2.0.0"'),
        encoding="utf-8",
    )
    agg = tmp_path / "agg.json"
    agg.write_text("100", encoding="utf-8")
    request = _request(tmp_path, epoch=9, policy_version="1.0.0")
    argv = ["release", "--policy", str(v2), "--ledger", db,
            "--request", str(request), "--aggregate", str(agg)]  # fmt: skip
    assert main(argv) == 1  # refused, as before
    out = capsys.readouterr().out
    assert "the request names policy version 1.0.0" in out
    assert "the policy this ledger was opened with" in out
    assert "version 2.0.0" in out
    assert "ledger has" not in out


def test_an_aggregate_that_holds_itself_is_refused_not_walked_forever() -> None:
    """Review s30: the null scan (and the flag scan before it) looped forever on an object
    array or a list that contains itself."""
    from dpledger.approval.aggregate import as_float64

    a = np.empty(1, object)
    a[0] = a
    lst: list[object] = [1.0]
    lst.append(lst)
    for agg in (a, lst):
        arr, why = as_float64(agg)
        assert arr is None
        assert why
