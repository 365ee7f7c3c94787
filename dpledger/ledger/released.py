"""The write path's objects per release: the entry's draft, and the
:class:`~dpledger.ledger.records.Release` a committed entry answers its request with.

Built once per entry of a round: positionally (a keyword call of a dataclass this wide
costs about a microsecond), the metric's public
:attr:`~dpledger.policy.MetricSpec.magnitude` (a rational's conversion) read once per spec.
"""

from __future__ import annotations

from dpledger import mechanisms as mech
from dpledger.approval import Prepared, ReleaseRequest, fingerprint
from dpledger.ledger.records import Entry, EntryDraft, Release
from dpledger.policy import MetricSpec, Policy
from dpledger.types import Budget

__all__ = ["draft_of", "to_release"]

_MAGNITUDES: dict[int, tuple[MetricSpec, float]] = {}
"""``id(spec) -> (spec, spec.magnitude)``. The spec is held, so its id names it while it is
here (a frozen model: its magnitude never changes); public facts only."""


def _magnitude(spec: MetricSpec) -> float:
    kept = _MAGNITUDES.get(id(spec))
    if kept is not None and kept[0] is spec:
        return kept[1]
    if len(_MAGNITUDES) >= 1024:  # bounded: a long-lived process may load many policies
        _MAGNITUDES.clear()
    value = spec.magnitude
    _MAGNITUDES[id(spec)] = (spec, value)
    return value


def to_release(
    request: ReleaseRequest, spec: MetricSpec, entry: Entry, *, retried: bool = False
) -> Release:
    """The :class:`Release` a committed entry answers ``request`` with; ``retried``: the
    entry was recorded by an earlier call (this one charged nothing)."""
    draft = entry.draft
    facts = draft.facts
    return Release.make(
        request=request,
        entry_id=entry.seq,
        entry_hash=entry.hash,
        noisy_sum=draft.output,  # copied once, read-only, by Release.make
        bar=spec.bar,
        bar_factor=mech.bar_factor(spec.bar, facts.mechanism),
        charge=draft.charge,
        facts=facts,
        kind=spec.kind,
        magnitude=_magnitude(spec),
        retried=retried,
    )


def draft_of(
    policy: Policy, p: Prepared, output: tuple[float, ...], principal: str | None
) -> EntryDraft:
    """The entry a prepared release under ``policy`` records with its noisy ``output``."""
    req = p.verdict.request
    charge = p.verdict.charge
    return EntryDraft(
        req.epoch, req.region, req.metric, policy.name, policy.version, policy.content_hash,
        p.spec.edges_version, p.facts, charge or Budget.zero(policy.unit), req.cohort,
        output, req.release_id, fingerprint(req, principal), principal,
    )  # fmt: skip
