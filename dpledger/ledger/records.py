"""Ledger value types: stored entries, released values, verification reports.

Stability contract: an :class:`Entry`'s fields and their meaning are persisted and
hash-chained; fields are never removed or re-interpreted, only added (with a schema
version bump and an upcaster for old rows).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpledger._bars import mean_half_width, sum_half_width
from dpledger.approval import ReleaseRequest
from dpledger.mechanisms import ROUNDING, MechanismFacts, bar_factor
from dpledger.metrics import interval_scales
from dpledger.types import BarKind, Budget, PrivacyUnit, Unit, nonnegative_real

__all__ = [
    "GENESIS",
    "Entry",
    "EntryDraft",
    "Release",
    "VerifyReport",
    "chain_hash",
    "chain_hash_v1",
    "hashed_output",
    "hashed_outputs",
    "is_chain_hash",
]

GENESIS = "0" * 64
"""The ``prev_hash`` of the first entry."""


def is_chain_hash(text: str) -> bool:
    """Whether ``text`` is a chain hash as a caller may give one: 64 hex digits, either
    case (the chain writes lower case: compare ``text.lower()``)."""
    return len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text)


@dataclass(frozen=True, slots=True)
class EntryDraft:
    """An entry before the store assigns its sequence number, time and hashes."""

    epoch: int
    region: str  # a region, or "*" for a release to all regions
    metric: str
    policy_name: str
    policy_version: str
    policy_hash: str
    edges_version: str | None
    facts: MechanismFacts
    charge: Budget  # exact, in the policy's unit (stored as two columns: unit, charge)
    cohort: int
    output: tuple[float, ...]
    release_id: str | None = None  # the caller's idempotency key, unique per ledger
    request_hash: str | None = None  # fingerprint of the request (fields, principal) answered
    principal: str | None = None  # who spent (e.g. the service's authenticated key), if known


@dataclass(frozen=True, slots=True)
class Entry:
    """One committed release: what was released, under which policy, at what cost."""

    seq: int
    created_at: str
    draft: EntryDraft
    prev_hash: str
    hash: str

    @property
    def entry_id(self) -> int:
        """The entry's id: its position in the chain (1-based, no gaps)."""
        return self.seq

    @property
    def privacy_unit(self) -> PrivacyUnit:
        """Whom the release's sensitivity is of: ``"client"``, or ``"record"``.

        Stored in the chain-hashed mechanism facts (written only when not ``"client"``,
        so entries from before units hash as they did); ``verify`` checks it against the
        entry's recorded policy.
        """
        return self.draft.facts.privacy_unit

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: the audit record a reviewer reads (exact ε as ``"p/q"``)."""
        d = self.draft
        return {
            "entry_id": self.seq,
            "created_at": self.created_at,
            "epoch": d.epoch,
            "region": d.region,
            "metric": d.metric,
            "policy": {"name": d.policy_name, "version": d.policy_version, "hash": d.policy_hash},
            "edges_version": d.edges_version,
            "mechanism": d.facts.as_dict(),
            "privacy_unit": d.facts.privacy_unit,
            "records_per_unit": d.facts.records,
            "unit": d.charge.unit,
            "charge": d.charge.text,
            "cohort": d.cohort,
            "output": list(d.output),
            "release_id": d.release_id,
            "request_hash": d.request_hash,
            "principal": d.principal,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


def chain_hash(seq: int, created_at: str, draft: EntryDraft, prev_hash: str) -> str:
    """SHA-256 over an entry's content, in one canonical JSON array, and its predecessor's hash.

    The array's order is fixed (stability contract: never reordered; new fields are
    appended); the mechanism facts are their canonical JSON text (:meth:`as_json`).
    """
    body = [
        seq,
        created_at,
        draft.epoch,
        draft.region,
        draft.metric,
        draft.policy_name,
        draft.policy_version,
        draft.policy_hash,
        draft.edges_version,
        draft.facts.as_json(),
        draft.charge.unit,
        draft.charge.text,
        draft.cohort,
        draft.output,
        draft.release_id,
        draft.request_hash,
        prev_hash,
        draft.principal,
    ]
    return hashlib.sha256(_CANONICAL.encode(body).encode()).hexdigest()


_CANONICAL = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
"""``json.dumps(…, separators=(",", ":"), allow_nan=False)`` built once: the same text,
without constructing an encoder per entry."""


def hashed_output(seq: int, created_at: str, draft: EntryDraft, prev_hash: str) -> tuple[str, str]:
    """``(output JSON, chain hash)`` of one new entry: :func:`hashed_outputs` of a batch of
    one (the write path's form of :func:`chain_hash`, which stays the definition)."""
    _, _, output, h = hashed_outputs(seq, created_at, [draft], prev_hash)[0]
    return output, h


def hashed_outputs(
    seq: int, created_at: str, drafts: Sequence[EntryDraft], prev_hash: str
) -> list[tuple[str, str, str, str]]:
    """``(mechanism JSON, charge text, output JSON, chain hash)`` of consecutive new
    entries, the first at ``seq`` after ``prev_hash``, each chained to the one before.

    The write path's form of :func:`chain_hash`, which stays the definition (``verify``
    uses it, so a divergence would fail every verify): the same canonical text, built by
    formatting instead of a JSON encoder per entry, and the output's text — compact JSON,
    what the entry stores — formatted once for both. Fields of another type than the
    write path makes (an int subclass, a non-float output) take :func:`chain_hash`; a
    text field that is not text raises ``TypeError``.

    A flush's entries share their time, and mostly their policy, mechanism and charge:
    the canonical text's run from the policy name through the charge is built once per
    distinct set of those objects in the batch (keyed by identity: the drafts hold them
    for the call), not once per entry.
    """
    at = _ascii(created_at)
    shared: dict[tuple[int, ...], tuple[str, str, str]] = {}
    out: list[tuple[str, str, str, str]] = []
    for d in drafts:
        key = (id(d.policy_name), id(d.policy_version), id(d.policy_hash),
               id(d.edges_version), id(d.facts), id(d.charge))  # fmt: skip
        plain = _plain(seq, d)
        output = _output_json(d.output) if plain else _CANONICAL.encode(d.output)
        parts = shared.get(key)
        if parts is None:
            fj, text = d.facts.as_json(), d.charge.text
            parts = shared[key] = (fj, text, _middle(d, fj, text) if plain else "")
        elif plain and not parts[2]:  # first met on a draft that took the definition
            parts = shared[key] = (parts[0], parts[1], _middle(d, parts[0], parts[1]))
        if plain:
            h = _digest(seq, at, d, prev_hash, parts[2], output)
        else:
            h = chain_hash(seq, created_at, d, prev_hash)
        out.append((parts[0], parts[1], output, h))
        seq, prev_hash = seq + 1, h
    return out


def _plain(seq: int, d: EntryDraft) -> bool:
    """Whether the numbers are of the types the write path makes (else :func:`chain_hash`)."""
    return (
        type(seq) is int
        and type(d.epoch) is int
        and type(d.cohort) is int
        and set(map(type, d.output)) <= _FLOAT  # every value a float (none: True)
    )


_FLOAT = {float}


def _output_json(out: tuple[float, ...]) -> str:
    """The compact JSON of an output of floats; ``ValueError`` as JSON's for a non-finite one."""
    if not all(map(math.isfinite, out)):
        raise ValueError("Out of range float values are not JSON compliant")
    return "[" + ",".join(map(float.__repr__, out)) + "]"  # what json writes for floats


def _middle(d: EntryDraft, facts_json: str, charge_text: str) -> str:
    """The canonical text from the policy name through the charge (no brackets)."""
    a = _ascii  # str (or a subclass) -> its JSON string, ensure_ascii; None is null
    return (
        f"{a(d.policy_name)},{a(d.policy_version)},{a(d.policy_hash)},"
        f"{'null' if d.edges_version is None else a(d.edges_version)},"
        f"{a(facts_json)},{a(d.charge.unit)},{a(charge_text)}"
    )


def _digest(seq: int, at: str, d: EntryDraft, prev_hash: str, middle: str, output: str) -> str:
    """SHA-256 of the canonical text (:func:`chain_hash`'s), ``at`` the time's JSON string."""
    a = _ascii
    text = (
        f"[{seq},{at},{d.epoch},{a(d.region)},{a(d.metric)},{middle},{d.cohort},{output},"
        f"{'null' if d.release_id is None else a(d.release_id)},"
        f"{'null' if d.request_hash is None else a(d.request_hash)},{a(prev_hash)},"
        f"{'null' if d.principal is None else a(d.principal)}]"
    )
    return hashlib.sha256(text.encode()).hexdigest()


_ascii = json.encoder.encode_basestring_ascii


def chain_hash_v1(
    seq: int, created_at: str, draft: EntryDraft, prev_hash: str, mechanism: dict[str, Any]
) -> str:
    """The chain rule of schema-1 ledgers (dpledger 0.1): SHA-256 of a sorted JSON object.

    ``mechanism`` is the entry's stored mechanism JSON, parsed as it was written. Entries
    written before a ledger was migrated to schema 2 keep this rule, so their hashes — and
    any head recorded outside the database — stay valid; it covers no release id, request
    hash or principal (schema-1 entries have none).
    """
    body = {
        "seq": seq,
        "created_at": created_at,
        "epoch": draft.epoch,
        "scope": draft.region,
        "metric": draft.metric,
        "policy": [draft.policy_name, draft.policy_version, draft.policy_hash],
        "edges_version": draft.edges_version,
        "mechanism": mechanism,
        "unit": draft.charge.unit,
        "charge": draft.charge.text,
        "cohort": draft.cohort,
        "output": list(draft.output),
        "prev": prev_hash,
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _unpickled(*values: Any) -> Release:
    """An unpickled :class:`Release`, its ``noisy_sum`` (the fourth field) read-only."""
    fields = list(values)
    fields[3] = _readonly(fields[3])
    return Release(*fields)


def _readonly(a: npt.NDArray[np.float64] | tuple[float, ...]) -> npt.NDArray[np.float64]:
    a = np.array(a, dtype=np.float64)  # always a copy: the caller's array stays its own
    # over immutable bytes: setflags(write=True) is refused (an array owning its memory
    # could be made writeable again and a release's value changed under it; review 39)
    out: npt.NDArray[np.float64] = np.frombuffer(a.tobytes(), dtype=np.float64).reshape(a.shape)
    return out


@dataclass(frozen=True, slots=True)
class Release:
    """A committed, noisy release with its error bar.

    ``value`` is what is published: the mean for a ``scalar_mean`` metric (noisy sum / n),
    the noisy vector of sums otherwise. ``error_bar`` is in ``value``'s units at the
    metric's bar kind (``ci95``: 95% of releases fall within ± it of the truth).
    Noisy counts may be negative: they are left unbiased here; clamp or project them
    only in post-processing that needs non-negative inputs (e.g. ratios of counts).
    """

    request: ReleaseRequest
    entry_id: int
    entry_hash: str  # the chain hash after this release: keep it outside the DB as an anchor
    noisy_sum: npt.NDArray[np.float64]
    scale: float
    error_bar: float
    bar: BarKind
    charge: Budget  # exact, in the policy's unit (ε, or ρ under zCDP)
    facts: MechanismFacts
    kind: str
    slack: float = 0.0  # what a bar adds on each sum, whatever the cohort: OpenDP's grid
    # and, after with_aggregate_error, the aggregate's own error (a fixed-point encoding)
    retried: bool = False  # recorded by an earlier call or an earlier request of this round:
    # this request charged nothing (not stored)
    rounding: float = 0.0  # the doubles' rounding per value summed (magnitude × ROUNDING):
    # a sum of n values is off by up to n × it, a mean by it

    @property
    def sum_slack(self) -> float:
        """What a bar adds on each sum: :attr:`slack` and the doubles' rounding of a sum of
        ``cohort`` values (the public bound on |noisy sum − noise − true sum|)."""
        return self.slack + self.request.cohort * self.rounding

    @classmethod
    def make(
        cls,
        *,
        request: ReleaseRequest,
        entry_id: int,
        entry_hash: str,
        noisy_sum: npt.NDArray[np.float64] | tuple[float, ...],
        bar: BarKind,
        bar_factor: float,
        charge: Budget,
        facts: MechanismFacts,
        kind: str,
        magnitude: float = 0.0,
        retried: bool = False,
    ) -> Release:
        """Build from the committed noisy sum; means and bars are post-processing.
        ``magnitude``: the metric's :attr:`~dpledger.policy.MetricSpec.magnitude`;
        ``retried``: the entry was recorded by an earlier call (see :attr:`charged_now`)."""
        n = request.cohort
        # OpenDP's grid, and the doubles' rounding of each value up to magnitude
        rounding = magnitude * ROUNDING
        bar_value = _half_width(bar_factor, facts.scale, facts.grid_slack, rounding, n, kind)
        # positional, in field order (a release is built per entry: keywords cost ~1 µs)
        return cls(
            request, entry_id, entry_hash, _readonly(noisy_sum), facts.scale, bar_value,
            bar, charge, facts, kind, facts.grid_slack, retried, rounding,
        )  # fmt: skip

    def with_aggregate_error(self, sum_error: float) -> Release:
        """This release with ``sum_error`` added to its slack and its bar (post-processing).

        ``sum_error`` is a public bound on |aggregate − the clients' true sum| per
        coordinate, e.g. :meth:`~dpledger.metrics.secure_sum.FixedPoint.sum_error` of the
        cohort for an aggregate summed on a fixed-point grid: the ledger noises the
        aggregate it is given, so only the caller knows how far that is from the truth.
        Derived intervals read :attr:`sum_slack`, so they account for it too.
        """
        e = nonnegative_real(sum_error, "sum_error")
        if e == 0.0:
            return self
        slack = self.slack + e
        factor = bar_factor(self.bar, self.facts.mechanism)
        n = self.request.cohort
        bar = _half_width(factor, self.scale, slack, self.rounding, n, self.kind)
        return dataclasses.replace(self, slack=slack, error_bar=bar)

    def __reduce__(self) -> tuple[object, ...]:
        """Pickle (and deepcopy) with ``noisy_sum`` read-only again: a copied array owns
        its memory, so the copy's value could be made writeable and changed (review 39)."""
        return _unpickled, tuple(getattr(self, f.name) for f in dataclasses.fields(self))

    def half_width(self, factor: float) -> float:
        """The half-width at ``factor`` noise scales (e.g. :func:`~dpledger.mechanisms.
        bar_factor` of another bar kind) in ``value``'s units, the slack included."""
        f = nonnegative_real(factor, "factor")  # a number ≥ 0: not None, NaN or text
        n = self.request.cohort
        return _half_width(f, self.scale, self.slack, self.rounding, n, self.kind)

    def interval_scale(self) -> tuple[float, bool]:
        """The noise scale intervals derived from this release are computed at, and whether
        its slack widened it (:func:`dpledger.metrics.interval_scales`: the scale itself
        while the slack is negligible). InvalidInput when the widening overflows."""
        (scale,), did = interval_scales(self.scale, np.full(self.noisy_sum.size, self.sum_slack))
        return scale, did

    @property
    def value(self) -> float | npt.NDArray[np.float64]:
        """The published value: a float (mean) or a read-only vector (sums)."""
        if self.kind == "scalar_mean":  # the mean: IEEE sum / n, as numpy's noisy_sum / n
            return float(self.noisy_sum[0]) / self.request.cohort
        return self.noisy_sum  # read-only

    @property
    def interval(
        self,
    ) -> tuple[float | npt.NDArray[np.float64], float | npt.NDArray[np.float64]]:
        """``value ± error_bar``."""
        v = self.value
        return (v - self.error_bar, v + self.error_bar)

    @property
    def charged_now(self) -> Budget:
        """What the request that returned this release charged for it: :attr:`charge`, or
        zero for a retry (:attr:`retried`: the entry's charge was made when recorded, by an
        earlier call or the round's first request with this id), so a round's releases'
        ``charged_now`` sum to :attr:`RoundResult.charged`."""
        return Budget.zero(self.charge.unit) if self.retried else self.charge

    @property
    def unit(self) -> Unit:
        """The unit of :attr:`charge`: ``"epsilon"`` or ``"rho"``."""
        return self.charge.unit

    @property
    def epsilon(self) -> Fraction:
        """Deprecated: the charge's amount, which holds ρ under zCDP; use :attr:`charge`."""
        warnings.warn(
            "Release.epsilon is deprecated (under zCDP it holds ρ): use Release.charge, "
            "an exact Budget with its unit",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.charge.amount

    @property
    def per_client(self) -> npt.NDArray[np.float64]:
        """The noisy sum divided by the cohort (the mean contribution per client)."""
        return _readonly(self.noisy_sum / self.request.cohort)

    @property
    def region(self) -> str:
        """The released region, or ``"*"`` for all."""
        return self.request.region

    @property
    def release_id(self) -> str | None:
        """The caller's idempotency key, if the request carried one."""
        return self.request.release_id

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary for reports and the CLI."""
        v = self.value
        return {
            "entry_id": self.entry_id,
            "entry_hash": self.entry_hash,
            "metric": self.request.metric,
            "epoch": self.request.epoch,
            "region": self.request.region,
            "cohort": self.request.cohort,
            "value": v if isinstance(v, float) else v.tolist(),
            "error_bar": self.error_bar,
            "bar": self.bar,
            "scale": self.scale,
            "charge": self.charge.text,
            "unit": self.charge.unit,
            "release_id": self.request.release_id,
            "retried": self.retried,
            "charged_now": self.charged_now.text,
        }


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Result of :meth:`Ledger.verify`: ``ok`` iff ``problems`` is empty.

    ``notices`` are facts an auditor should see that are not failures, e.g. a policy
    version that raised the budget from some epoch on.
    """

    entries_checked: int
    problems: tuple[str, ...]
    notices: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True iff the chain, every re-derived charge and every scope's total are sound."""
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok


def _half_width(
    factor: float, scale: float, slack: float, rounding: float, n: int, kind: str
) -> float:
    """``factor`` noise scales plus the slack and the rounding of ``n`` values, on a mean
    over ``n`` (:func:`~dpledger.mechanisms.error_bar_for_scale`'s arithmetic, monotone in
    ``n``) or on each coordinate of a sum (that over ``n`` never above the mean's)."""
    mean = mean_half_width(factor, scale, n, slack, rounding)
    return mean if kind == "scalar_mean" else sum_half_width(mean, n)
