"""Policy loading, validation, exact budgets and content hashing."""

from __future__ import annotations

import warnings
from fractions import Fraction
from pathlib import Path

import pytest
from factories import BASE, SPATIAL, policy, policy_text, spatial

from dpledger import Policy, PolicyError, PolicyWarning
from dpledger.policy import to_fraction


def test_shipped_policy_has_the_seeds_five_metrics_and_four_regions() -> None:
    p = spatial()
    assert set(p.metrics) == {
        "clipped_mean_loss",
        "along_across_ratio",
        "error_histogram",
        "calibration_gap",
        "coverage",
    }
    assert p.metrics["error_histogram"].edges == (0.5, 1.0, 2.0, 5.0, 10.0, 25.0)
    assert p.metrics["error_histogram"].size == 7
    assert p.metrics["calibration_gap"].size == 10
    ratio_clip = p.metrics["along_across_ratio"].clip
    assert ratio_clip is not None
    assert ratio_clip.high == 10
    assert len(p.regions.names) == 4
    assert p.eval_budget == Fraction(1)
    assert all(p.release_budget(m) == Fraction(1, 5) for m in p.metrics)
    assert p.overcommitment() == 0


def test_decimals_are_exact_so_ten_tenths_make_one() -> None:
    assert to_fraction(0.1) == Fraction(1, 10)
    assert to_fraction("0.1") == Fraction(1, 10)
    assert sum([to_fraction(0.1)] * 10, Fraction(0)) == 1
    with pytest.raises(ValueError, match="finite"):
        to_fraction(float("inf"))
    with pytest.raises(ValueError, match="boolean"):
        to_fraction(True)


def test_content_hash_is_stable_and_changes_with_any_field() -> None:
    a, b = policy(), policy()
    assert a.content_hash == b.content_hash
    assert hash(a) == hash(b)
    assert policy(scalar_eps="0.2").content_hash != a.content_hash


def test_equality_is_equal_content_and_source_as_pydantic_compared_fields() -> None:
    a, b = policy(), policy()
    assert a is not b
    assert a == b
    assert a != policy(scalar_eps="0.2")  # any field
    assert a != Policy.from_toml(policy_text(), source="another file")  # source is not hashed
    same_source = Policy.from_toml(policy_text(), source="test-policy.toml")
    assert a == same_source
    assert a != a.model_dump(mode="json")  # another type
    assert a != a.content_hash

    class Sub(Policy):
        pass

    sub = Sub.from_toml(policy_text(), source="test-policy.toml")  # same content and source
    assert a != sub
    assert sub != a
    assert {a: 1}[b] == 1  # equal policies are one key (hash is the content hash)


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        ('neighbouring = "replace"\n', "", "neighbouring", "required"),
        ('neighbouring = "replace"', 'neighbouring = "swap"', "neighbouring", "replace"),
        ("[1.0, 2.0, 3.0, 4.0]", "[1.0, 3.0, 2.0, 4.0]", "metrics.hist5.edges", "increasing"),
        ("[1.0, 2.0, 3.0, 4.0]", "[1.0, nan, 3.0]", "metrics.hist5.edges", "finite"),
        ('eval_fraction = "0.25"', 'eval_fraction = "0"', "eval_fraction", "(0, 1]"),
        ('eval_fraction = "0.25"', 'eval_fraction = "1.5"', "eval_fraction", "(0, 1]"),
        ('edges_version = "h5/v1"\n', "", "metrics.hist5", "edges_version"),
        ('epsilon = "0.25"', 'epsilon = "0.25"\nweight = "1"', "metrics.loss_b", "exactly one"),
        ('epsilon = "0.25"', 'epsilon = "-0.25"', "metrics.loss_b", "> 0"),
        ('low = "-1"', 'low = "5"', "metrics.loss_b.clip", "below"),
        ("dimension = 4", "", "metrics.gap", "dimension"),
    ],
)
def test_invalid_policy_names_the_file_field_and_problem(
    old: str, new: str, field: str, message: str
) -> None:
    text = BASE.format(
        neighbouring="replace",
        epoch_epsilon="4",
        eval_fraction="0.25",
        scalar_eps="0.1",
        edges20="1.0, 2.0",
        version="1",
    )
    assert old in text
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(text.replace(old, new, 1), source="bad.toml")
    assert info.value.source == "bad.toml"
    assert field in str(info.value)
    assert message in str(info.value)


def test_unreadable_file_and_bad_toml_are_policy_errors(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"missing\.toml"):
        Policy.load(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed")
    with pytest.raises(PolicyError, match="not valid TOML"):
        Policy.load(bad)


@pytest.mark.parametrize("fraction", ["0.05", "0.5"])
def test_eval_fraction_outside_advice_warns_but_loads(fraction: str) -> None:
    with pytest.warns(PolicyWarning, match="outside 0.1–0.4"):
        p = policy(eval_fraction=fraction, epoch_epsilon="40")  # every release still fits
    assert p.eval_budget == Fraction(fraction) * 40


@pytest.mark.parametrize(
    ("fraction", "said"),
    [("0.05", "error bars that swallow the signal"), ("0.5", "evaluation takes 50% of each")],
)
def test_eval_fraction_advice_names_the_side_it_falls_on(fraction: str, said: str) -> None:
    # docs6: 0.5 was told "below it the error bars swallow the signal" (the wrong side)
    with pytest.warns(PolicyWarning) as caught:
        policy(eval_fraction=fraction, epoch_epsilon="40")
    (text,) = [str(w.message) for w in caught if "eval_fraction" in str(w.message)]
    assert said in text
    other = {"0.05": "training", "0.5": "swallow"}[fraction]
    assert other not in text


def test_a_metric_whose_one_release_exceeds_the_evaluation_budget_is_refused_at_load() -> None:
    with pytest.raises(PolicyError, match="'hist5' costs 1/2 per release, more than the whole"):
        policy(eval_fraction="0.05")  # ε_eval = 0.2: a 0.5 release could never happen


def test_eval_fraction_inside_advice_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        policy(eval_fraction="0.25")


def test_unknown_metric_lists_the_known_ones() -> None:
    with pytest.raises(PolicyError, match="hist5"):
        policy().metric("nope")


def test_weights_share_what_absolute_budgets_leave_and_overcommitment_is_reported() -> None:
    text = SPATIAL.read_text().replace('weight = "1"', 'epsilon = "0.5"', 3)
    with pytest.warns(PolicyWarning, match="over-committed by 0.5"):
        p = Policy.from_toml(text)
    # three absolute metrics at 0.5 exceed ε_eval = 1; the weighted two get nothing
    assert p.release_budget("clipped_mean_loss") == Fraction(1, 2)
    assert p.release_budget("coverage") == 0
    assert p.overcommitment() == Fraction(1, 2)
    two_rounds = spatial().release_budget("coverage", rounds_per_epoch=2)
    assert two_rounds == Fraction(1, 10)


def test_zcdp_policy_needs_rho_and_rejects_gaussian_under_pure() -> None:
    text = SPATIAL.read_text()
    with pytest.raises(PolicyError, match="epoch_rho"):
        Policy.from_toml(text.replace('definition = "pure"', 'definition = "zcdp"'))
    gauss = text.replace(
        'kind = "scalar_mean"\ndescription',
        'kind = "scalar_mean"\nmechanism = "gaussian"\ndescription',
        1,
    )
    with pytest.raises(PolicyError, match="zcdp"):
        Policy.from_toml(gauss)


def test_a_loaded_policy_cannot_be_changed_in_place() -> None:
    # a mutable metrics dict let a cached mechanism (Δ = 3.4) outlive a changed clip
    p = spatial()
    with pytest.raises(TypeError):
        p.metrics["clipped_mean_loss"] = p.metrics["coverage"]  # type: ignore[index]
    with pytest.raises(ValueError, match="frozen"):
        p.metrics["coverage"].cap_per_client = Fraction(100)  # type: ignore[misc]


def test_vector_sums_are_signed_unless_declared_and_histograms_are_counts() -> None:
    p = policy()
    assert p.metrics["gap"].is_nonnegative is False
    assert p.metrics["hist5"].is_nonnegative is True


@pytest.mark.parametrize(
    ("version", "why"),
    [
        ("h5\\u0000v1", "control character"),
        ("h5\\nv1", "control character"),
        ("h5\\u007fv1", "control character"),
        ("x" * 129, "1-128 characters"),
        ("", "1-128 characters"),
    ],
)
def test_an_edges_version_is_short_printable_text(version: str, why: str) -> None:
    # it is stored in every entry and sent in every request: a NUL would be cut short by
    # PostgreSQL, more than 128 characters could never be requested
    toml = policy_text_with(f'edges_version = "{version}"')
    with pytest.raises(PolicyError, match=why):
        Policy.from_toml(toml)


def policy_text_with(edges_version_line: str) -> str:
    from factories import policy_text

    return policy_text().replace('edges_version = "h5/v1"', edges_version_line)


def test_a_ledger_recorded_under_an_older_rule_still_reads_and_verifies(tmp_path: Path) -> None:
    # tests/data/ledger-long-edges.db was made by dpledger c12a5f8 under a policy whose
    # edges_version (200 characters) new policies may no longer use: the rule applies to
    # new policies, never to one read back from a ledger (make_ledger_long_edges.py)
    import shutil

    from dpledger import Ledger

    db = tmp_path / "old.db"
    shutil.copyfile(Path(__file__).parent / "data" / "ledger-long-edges.db", db)
    before = db.read_bytes()
    text = (Path(__file__).parent / "data" / "make_ledger_long_edges.py").read_text()
    body = text.split('TEXT = """', 1)[1].split('"""', 1)[0]
    with pytest.raises(PolicyError, match="1-128 characters"):
        Policy.from_toml(body.replace("EDGES", "v" * 200))
    newer = Policy.from_toml(body.replace('version = "1"', 'version = "2"').replace("EDGES", "v2"))
    with Ledger.open(db, newer, mode="read") as ledger:
        report = ledger.verify()
        assert report.ok, report.problems
        assert ledger.budget_changes() == ()
        assert len(ledger.entries()) == 2
    assert db.read_bytes() == before


def test_a_policy_of_many_metrics_allocates_each_its_exact_share() -> None:
    """300 weighted and 100 absolute metrics: every release budget and allocation equals
    the definition (what the absolute ones leave, split by weight), summed once per policy
    (per release it made a 1,000-metric check take seconds: O(metrics²))."""
    lines = [
        'name = "many"', 'version = "1"', 'neighbouring = "replace"', 'epoch_epsilon = "40"',
        'eval_fraction = "0.25"', "rounds_per_epoch = 2", "[regions]", 'names = ["r"]',
    ]  # fmt: skip
    for i in range(400):
        share = f'epsilon = "0.00{i % 7 + 1}"' if i % 4 == 0 else f'weight = "{i % 5 + 1}"'
        lines += [
            f"[metrics.m{i}]",
            'kind = "scalar_mean"',
            share,
            'clip = { low = "0", high = "1", source = "t" }',
        ]
    p = Policy.from_toml("\n".join(lines))
    absolute = sum(Fraction(f"0.00{i % 7 + 1}") for i in range(0, 400, 4))
    weights = sum(Fraction(i % 5 + 1) for i in range(400) if i % 4)
    free = Fraction(10) / 2 - absolute
    for i in range(400):
        want = Fraction(f"0.00{i % 7 + 1}") if i % 4 == 0 else free * (i % 5 + 1) / weights
        assert p.release_budget(f"m{i}") == want
        assert p.allocation_of(f"m{i}") == 2 * want
    assert p.absolute_per_round() == absolute


def test_an_error_lists_at_most_twelve_problems_and_counts_the_rest() -> None:
    lines = ['name = "n"', 'version = "1"', 'neighbouring = "replace"', 'epoch_epsilon = "4"',
             "[regions]", 'names = ["r"]']  # fmt: skip
    for i in range(40):  # each metric misses its clip's source
        lines += [f"[metrics.m{i}]", 'kind = "scalar_mean"', 'weight = "1"',
                  'clip = { low = "0", high = "1" }']  # fmt: skip
    with pytest.raises(PolicyError, match="and 28 more problems") as e:
        Policy.from_toml("\n".join(lines))
    assert str(e.value).count("clip.source") == 12
