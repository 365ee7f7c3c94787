"""Client-level or record-level? The bars of one federation under each privacy unit.

A cross-silo federation (20 hospitals, each with its patients' records) can be protected
at two units. Client-level: each silo is one client, and a release hides any one silo's
whole contribution — so a silo's contribution must be bounded, and keeping every record
(FLAM-exact metrics) needs a bound as large as the largest silo's. Record-level: a
release hides one person's records (at most ``max_records_per_person``), and the
noise shrinks by the ratio of the two bounds.

:func:`compare_units` takes a record-level policy and the silos' record counts, derives
the client-level twin of the policy (:func:`client_twin`: the same budgets and metrics,
each bound widened to what a silo of 1 up to the largest silo's record count can sum, so
that no record is clipped away), and reports, per metric, the noise and the error bar
of a release over every silo on the same scale — the per-record mean over all records —
under each unit. Every figure comes from :func:`dpledger.mechanisms.mechanism_facts`,
what the ledger charges.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from dpledger import mechanisms as mech
from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.planning._common import positive_int, text_table, validated_policy
from dpledger.policy import FrozenModel, Policy
from dpledger.types import MAX_COHORT, BarKind, Budget, cohort_size

__all__ = ["UnitComparison", "client_twin", "compare_units", "units_table"]


class UnitComparison(FrozenModel):
    """One metric of a release over every silo, under each privacy unit.

    Bars are on the per-record mean over all ``records`` (a cell share for a confusion
    matrix, the mean for a scalar), at the metric's bar kind, so the two are comparable.
    """

    metric: str
    budget_per_release: Budget  # the same under both units: only the bound changes
    silos: int
    records: int
    largest_silo: int
    bar: BarKind
    client_sensitivity: float
    record_sensitivity: float
    client_bar: float
    record_bar: float
    ratio: float  # client_bar / record_bar
    client_protects: str
    record_protects: str


def client_twin(policy: Policy, largest_silo: int) -> Policy:
    """The client-level policy a record-level ``policy`` would need to keep every record.

    Each silo is one client; its contribution sums 1 to ``largest_silo`` (m) records, so
    a scalar's clip [low, high] becomes [min(low, m·low), max(high, m·high)] (m × clip
    when it holds 0; for a clip [1, 5], [1, 5m]: a silo of one record sums 1, which
    [m, 5m] would clip away, and under ``replace`` its Δ would be understated by
    (m − 1)·low) and a vector's ``cap_per_client`` is ``largest_silo × cap_per_record``.
    Budgets, relation, definition and regions stay.
    """
    if policy.privacy_unit != "record":
        raise InvalidInput(
            "compare units from a record-level policy (privacy_unit = 'record'): its "
            "client-level twin is derived from it"
        )
    m = positive_int(largest_silo, "largest silo's record count")
    data: dict[str, Any] = policy.model_dump(mode="json", exclude={"source"})
    data["privacy_unit"] = "client"
    data.pop("max_records_per_person")
    for spec in data["metrics"].values():
        if spec.get("clip") is not None:
            clip = spec["clip"]
            low, high = Fraction(clip["low"]), Fraction(clip["high"])
            spec["clip"] = {  # a silo sums 1..m records: from min(low, m·low) to max(high, m·high)
                "low": _text(min(low, m * low)),
                "high": _text(max(high, m * high)),
                "source": f"1 to {m} records × per-record clip ({clip['source']})",
            }
        if spec.get("cap_per_record") is not None:
            spec["cap_per_client"] = _times(spec.pop("cap_per_record"), m)
        spec.pop("y_clip", None)
        spec.pop("y_pred_clip", None)
    data["version"] = f"{policy.version}-client-twin"[:64]
    return Policy.from_mapping(data, source=f"{policy.source} (client-level twin)")


def _times(text: str, m: int) -> str:
    return _text(Fraction(text) * m)


def _text(q: Fraction) -> str:
    return f"{q.numerator}/{q.denominator}"


def compare_units(policy: Policy, silos: Mapping[str, int]) -> tuple[UnitComparison, ...]:
    """Per metric, the bar of one release over every silo under each privacy unit.

    ``silos`` maps each silo to its record count (after the person bound). Metrics the
    policy gives no budget are left out.
    """
    policy = validated_policy(policy)
    if not isinstance(silos, Mapping):  # before its truth value: an array has none (F6)
        raise InvalidInput(f"silos must map each silo to its record count, got {shown(silos, 60)}")
    if not silos:
        raise InvalidInput("give each silo's record count, e.g. {'hospital-01': 180, ...}")
    counts = {name: cohort_size(n, f"record count of silo {name!r}") for name, n in silos.items()}
    records, largest = sum(counts.values()), max(counts.values())
    twin = client_twin(policy, largest)  # refuses a policy that is not record-level
    unknown = [name for name in silos if not policy.regions.admits(name)]
    if unknown:
        raise InvalidInput(
            f"unknown silo {shown(unknown[0])}: each silo is a region of policy {policy.name}, "
            + (
                "whose open region names are 1-64 letters, digits, '.', '_' or '-' "
                "(first a letter or digit)"
                if policy.regions.open
                else f"which declares {', '.join(policy.regions.names)}"
            )
        )
    if records > MAX_COHORT:  # review 40: bars of a release the ledger refuses (its cohort)
        raise InvalidInput(
            f"one release over every silo would count {records:_} records, above the largest "
            f"cohort a release accepts ({MAX_COHORT:_}): compare fewer silos"
        )
    out = []
    for name, spec in policy.metrics.items():
        if policy.release_budget(name) <= 0:
            continue
        rec, _ = mech.mechanism_facts(policy, name)
        cli, _ = mech.mechanism_facts(twin, name)
        # the bars the releases print: OpenDP's grid and the doubles' rounding included
        # (review 40: without them the record bar at clip 1e-12 was 9% below a release's)
        rec_bar = mech.error_bar_of(rec, records, spec.bar, spec.magnitude)
        cli_bar = mech.error_bar_of(cli, records, spec.bar, twin.metric(name).magnitude)
        out.append(
            UnitComparison(
                metric=name,
                budget_per_release=Budget(policy.release_budget(name), policy.unit),
                silos=len(counts),
                records=records,
                largest_silo=largest,
                bar=spec.bar,
                client_sensitivity=cli.sensitivity,
                record_sensitivity=rec.sensitivity,
                client_bar=cli_bar,
                record_bar=rec_bar,
                ratio=cli_bar / rec_bar,
                client_protects=twin.protects,
                record_protects=policy.protects,
            )
        )
    return tuple(out)


def units_table(rows: tuple[UnitComparison, ...]) -> str:
    """Aligned text: one line per metric, then one sentence on what each unit protects."""
    if not rows:
        return "no metric of this policy has a budget"
    first = rows[0]
    head = (
        f"one release over {first.silos} silos, {first.records} records (largest silo "
        f"{first.largest_silo}); bars on the per-record mean over all records"
    )
    body = [
        (
            r.metric,
            r.budget_per_release.text,
            f"{r.client_sensitivity:.4g}",
            f"{r.client_bar:.4g} {r.bar}",
            f"{r.record_sensitivity:.4g}",
            f"{r.record_bar:.4g} {r.bar}",
            f"{r.ratio:.3g}x",
        )
        for r in rows
    ]
    sym = first.budget_per_release.symbol
    headers = ["metric", f"{sym}/release", "Δ client", "bar client", "Δ record", "bar record"]
    headers.append("client/record")
    return "\n".join(
        [
            head,
            text_table(headers, body, align="lrrrrrr"),
            "",
            f"client-level: {first.client_protects}.",
            f"record-level: {first.record_protects}.",
        ]
    )
