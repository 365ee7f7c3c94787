"""Audit s29: typos in planning arguments, deeply nested values and oversized demos.

F3: ``error_bar``/``cohort_floor`` read an unknown ``measure`` as ρ and an unknown
``mechanism`` as Gaussian — a bar and cohort floor 3.2 × too small, silently. F4: a value
nested 100,000 deep made validators raise RecursionError while printing it. F6: a list as a
metric name raised TypeError. F11: ``demo --clients 99999999999`` died of MemoryError
(exit 3, "internal error").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dpledger as dl
from dpledger import DpLedgerError, InvalidInput, Policy
from dpledger._shown import shown
from dpledger.approval import evaluate
from dpledger.cli.main import main
from dpledger.sim.demo import DEFAULT_POLICY, MAX_DEMO_CLIENTS


@pytest.mark.parametrize("kw", [{"measure": "Epsilon"}, {"measure": 5}, {"mechanism": "x"}])
def test_planning_refuses_an_unknown_measure_or_mechanism(kw: dict[str, object]) -> None:
    with pytest.raises(InvalidInput, match="must be"):
        dl.error_bar(1.0, 0.2, 2400, **kw)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="must be"):
        dl.cohort_floor(1.0, 0.2, 0.001, **kw)  # type: ignore[arg-type]


def test_the_known_measures_still_plan() -> None:
    eps = dl.error_bar(1.0, 0.2, 2400)
    assert dl.error_bar(1.0, 0.2, 2400, measure="epsilon") == eps
    assert dl.error_bar(1.0, 0.02, 2400, measure="rho", mechanism="gaussian") > 0


def _deep() -> list[object]:
    deep: list[object] = [1.0]
    for _ in range(100_000):
        deep = [deep]
    return deep


def test_a_deeply_nested_value_is_a_typed_error_everywhere_it_is_printed(tmp_path: Path) -> None:
    deep = _deep()
    policy = Policy.load(DEFAULT_POLICY)
    calls = [
        lambda: dl.error_bar(1.0, 0.2, deep),
        lambda: dl.cohort_floor(1.0, 0.2, deep),
        lambda: dl.plan(policy, {"na": 10}, rounds_per_epoch=deep),
        lambda: dl.budget_for_target(policy, deep, 0.1, 10),
        lambda: Policy.load(deep),
        lambda: dl.Ledger.open(tmp_path / "x.db", policy, mode=deep),
        lambda: dl.calibrate_clip([1.0, 2.0], epsilon=deep, cohort=10),
        lambda: dl.metrics.classification_intervals(np.eye(2) * 50, 1.0, level=deep),
    ]
    for call in calls:
        with pytest.raises(DpLedgerError):
            call()  # type: ignore[no-untyped-call]
    assert not (tmp_path / "x.db").exists()


def test_shown_is_bounded_and_never_fails() -> None:
    assert shown(_deep()).startswith("[[[")
    assert len(shown(list(range(10_000)))) <= 60
    assert shown("abc") == "'abc'"
    assert shown("x" * 500, 20).endswith("…")  # a cut says so (review s29b)
    assert len(shown("x" * 500, 20)) == 20
    assert shown("x" * 10, 20) == repr("x" * 10)

    class Bad:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert "Bad" in shown(Bad())
    assert "int" in shown(10**5000)  # past Python's 4,300-digit limit


@pytest.mark.parametrize("name", [[], {"a": 1}, None, 3])
def test_a_metric_name_that_is_not_text_is_a_policy_error(name: object) -> None:
    policy = Policy.load(DEFAULT_POLICY)
    for method in (policy.metric, policy.release_budget, policy.allocation_of, policy.mechanism):
        with pytest.raises(dl.PolicyError, match="a metric name is text"):
            method(name)  # type: ignore[arg-type]


def test_a_demo_larger_than_it_simulates_is_exit_2_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "demo.db"
    args = ["demo", "--clients", str(MAX_DEMO_CLIENTS + 1), "--ledger", str(db), "--quiet"]
    assert main(args) == 2
    assert "more than the demo simulates" in capsys.readouterr().err
    assert not db.exists()


_POLICY = """
name = "p"
version = "1"
neighbouring = "replace"
{budget}
[regions]
{regions}
[metrics.loss]
kind = "scalar_mean"
{metric}
clip = {{ low = "0", high = "1", source = "test" }}
"""


@pytest.mark.parametrize(
    ("budget", "regions", "metric", "says"),
    [
        ('epoch_epsilon = "1"\nepoch_rho = "1000"', 'names = ["a"]', 'epsilon = "0.1"',
         "epoch_rho has no effect"),
        ('definition = "zcdp"\nepoch_rho = "1"\nepoch_epsilon = "9"', 'names = ["a"]',
         'rho = "0.01"', "epoch_epsilon has no effect"),
        ('epoch_epsilon = "1"', 'names = ["a"]\nopen = true', 'epsilon = "0.1"',
         "do not limit them"),
    ],
)  # fmt: skip
def test_a_field_that_has_no_effect_is_a_warning(
    budget: str, regions: str, metric: str, says: str
) -> None:
    """Audit s29, F9: such a policy loaded silently; a reviewer read a budget (or a
    partition) that is not applied."""
    text = _POLICY.format(budget=budget, regions=regions, metric=metric)
    with pytest.warns(dl.PolicyWarning, match=says):
        Policy.from_toml(text, source="t")


def test_a_policy_with_only_what_applies_loads_without_a_warning() -> None:
    import warnings

    text = _POLICY.format(budget='epoch_epsilon = "1"', regions='names = ["a"]',
                          metric='epsilon = "0.1"')  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Policy.from_toml(text, source="t")


def test_a_measure_or_mechanism_that_is_not_text_is_refused_typed() -> None:
    with pytest.raises(InvalidInput):
        dl.error_bar(1.0, 0.2, 2400, measure=np.array(["rho"]))  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        dl.error_bar(1.0, 0.2, 2400, mechanism=np.array(["x", "y"]))  # type: ignore[arg-type]


def test_a_demo_of_a_huge_integer_is_typed() -> None:
    from dpledger.sim.demo import run_demo

    with pytest.raises(InvalidInput, match="more than the demo simulates"):
        run_demo(n_clients=10**5000, progress=None)


@pytest.mark.parametrize("huge", [10**400, -(10**5000)], ids=["1e400", "-1e5000"])
def test_an_aggregate_beyond_a_double_is_not_called_nan(huge: int) -> None:
    """Audit s29, F8: a finite integer beyond 1.8e308 was refused as "NaN/inf"."""
    pol = Policy.load(DEFAULT_POLICY)
    request = dl.ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="eu-west", cohort=2400)
    verdict = evaluate(pol, request, huge, None).verdict
    assert not verdict.approved
    said = " ".join(c.reason for c in verdict.checks if not c.passed)
    assert "beyond a double" in said


def test_a_demo_that_runs_out_of_memory_is_exit_2_before_any_ledger(tmp_path: Path) -> None:
    """Review s29b: the demo's largest fleet needs ~8 GB; on a smaller machine the
    MemoryError was exit 3 ("internal error"). Now exit 2, nothing created."""
    import resource
    import subprocess
    import sys

    def limit() -> None:  # 1.5 GB of address space: enough to start, not for 1e6 clients
        resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))

    db = tmp_path / "demo.db"
    run = subprocess.run(
        [sys.executable, "-m", "dpledger.cli", "demo", "--ledger", str(db), "--quiet",
         "--clients", "1000000"],
        preexec_fn=limit, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "not enough memory" in run.stderr
    assert "Traceback" not in run.stderr
    assert not db.exists()
