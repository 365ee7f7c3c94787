"""The audit: re-check a ledger from its own rows, trusting none of them.

:func:`verify` reads every table in one snapshot and reports each problem it finds,
naming the row, instead of stopping at the first: an unreadable value (text where a
number belongs, a body that is not JSON) is a failure to report, never a crash. It
checks, in order of what an attacker would have to forge:

- the hash chain (sequence, ``prev_hash``, each entry's content hash), and the chain
  head against the meta table and, if given, an anchor kept outside the database;
- every recorded policy body against its content hash, so a budget raised in a stored
  policy is caught even when the chain itself is intact;
- every entry against the policy it names: the mechanism facts and charge that policy
  calibrates, and OpenDP's privacy map at the recorded facts (never above the charge);
- the spend table against the entries' sums, and each epoch's spend against its own
  policy's budget and per-metric allocations.

Budget increases between policy versions are not failures; they are reported as
notices, so that an auditor sees from which epoch a larger budget applied.
"""

from __future__ import annotations

import json
import re
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dpledger import mechanisms as mech
from dpledger.accounting import EpochSpend, binding_loss
from dpledger.errors import DpLedgerError, LedgerChanged, StoreError
from dpledger.ledger.guards import guard_problems
from dpledger.ledger.records import GENESIS, Entry, VerifyReport, chain_hash, chain_hash_v1
from dpledger.ledger.schema import CHAIN_V1_THROUGH, row_to_entry, stored_amount
from dpledger.ledger.store import SqlStore
from dpledger.policy import ALL, Policy

__all__ = ["budget_notices", "verify"]

_BATCH = 2000
_READS = 5  # reads of a ledger another process keeps changing under a lock-free handle
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class _Audit:
    """The running state of one verification."""

    problems: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    policies: dict[str, Policy | None] = field(default_factory=dict)  # hash -> valid policy
    losses: dict[mech.MechanismFacts, Fraction | None] = field(default_factory=dict)
    charges: dict[tuple[int, str, str], Fraction] = field(default_factory=dict)
    epoch_policy: dict[int, str] = field(default_factory=dict)
    checked: int = 0
    prev_seq: int = 0
    prev_hash: str = GENESIS
    anchored: bool | None = None
    binding: dict[str, object] = field(default_factory=dict)  # the meta's policy name, unit
    v1_through: int = 0  # entries up to here were written under schema 1 (a migrated ledger)


def verify(
    store: SqlStore, current: Policy | None, expected_head: tuple[int, str] | None = None
) -> VerifyReport:
    """Verify the ledger in ``store`` (opened with ``current``); see the module docstring.
    ``current`` None: the policy binding is not checked (``migrate`` restoring triggers).

    A read handle that reads without SQLite's locks reads again, after a short pause,
    when another process changed the ledger meanwhile (:class:`LedgerChanged`); after
    :data:`_READS` reads it raises that error (no verdict: nothing is wrong with the
    ledger), never a failed verification (review s27).
    """
    for attempt in range(_READS - 1):
        try:
            return _verify(store, current, expected_head)
        except LedgerChanged:
            time.sleep(0.05 * 2**attempt)
    return _verify(store, current, expected_head)


def _verify(
    store: SqlStore, current: Policy | None, expected_head: tuple[int, str] | None
) -> VerifyReport:
    """One read of the ledger, verified (:class:`LedgerChanged` propagates)."""
    a = _Audit()
    try:
        with store.snapshot():
            meta = store.audit_rows("meta")
            a.binding = {str(k): v for k, v in meta if k in ("policy_name", "unit")}
            a.v1_through = _v1_through(a, meta)
            _check_policies(a, store.audit_rows("policies"))
            after: Any = 0
            while batch := store.raw_entries(after=after, limit=_BATCH):
                for row in batch:
                    _check_entry(a, row, expected_head)
                after = batch[-1][0]
            rows = store.count()  # the chain is read from entry 1 on: a row below is
            spend = store.audit_rows("spend")  # off it, yet a retry or binding reads it
            a.problems.extend(store.integrity_problems() + guard_problems(store))
    except StoreError as e:
        if isinstance(e, LedgerChanged):
            raise
        return VerifyReport(a.checked, (*a.problems, f"store unreadable: {e}"), tuple(a.notices))
    if rows != a.checked:
        a.problems.append(
            f"the entries table holds {rows} rows but the chain from entry 1 reaches "
            f"{a.checked}: {rows - a.checked} row(s) whose entry id is 0, negative or NULL "
            "were added outside the chain"
        )
    _check_meta(a, meta, current, expected_head)
    _check_spend(a, spend)
    _check_epochs(a)
    return VerifyReport(a.checked, tuple(a.problems), tuple(a.notices))


def _v1_through(a: _Audit, meta: Iterable[tuple[Any, ...]]) -> int:
    """The last schema-1 entry of a migrated ledger (0 if it never was schema 1)."""
    value = dict((str(k), v) for k, v in meta).get(CHAIN_V1_THROUGH)
    if value is None:
        return 0
    if not (isinstance(value, str) and value.isdigit() and len(value) <= 19):
        a.problems.append(f"meta {CHAIN_V1_THROUGH} is not an entry id: {value!r}")
        return 0
    return int(value)


# -- policies ------------------------------------------------------------------------------


def _check_policies(a: _Audit, rows: Iterable[tuple[Any, ...]]) -> None:
    """Parse each recorded policy; its body must hash to the hash it is recorded under."""
    versions: dict[str, str] = {}
    for h, name, version, body in rows:
        label = f"recorded policy {str(h)[:12]}…"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # its warnings were shown when it was in use
                policy = Policy.from_mapping(json.loads(body), source=label, recorded=True)
        except (ValueError, TypeError, RecursionError, DpLedgerError) as e:
            a.problems.append(f"{label}: body is unreadable ({type(e).__name__}: {e})")
            a.policies[str(h)] = None
            continue
        if policy.content_hash != h:
            a.problems.append(
                f"{label} (version {version}): its body does not match its content hash: "
                "the recorded policy was edited"
            )
            a.policies[str(h)] = None
            continue
        if (policy.name, policy.version) != (name, version):
            a.problems.append(f"{label}: recorded as {name} {version} but its body says otherwise")
        if versions.setdefault(str(version), str(h)) != h:
            a.problems.append(f"{label}: version {version} is recorded with two contents")
        a.policies[str(h)] = policy


# -- entries -------------------------------------------------------------------------------


def _check_entry(a: _Audit, row: tuple[Any, ...], anchor: tuple[int, str] | None) -> None:
    a.checked += 1
    seq, stored_prev, stored_hash = row[0], row[-2], row[-1]
    try:
        e = row_to_entry(row)
    except DpLedgerError as err:
        a.problems.append(f"entry {seq!r}: unreadable: {err}")
        if isinstance(seq, int) and not isinstance(seq, bool):
            a.prev_seq = seq
        a.prev_hash = str(stored_hash)
        return
    if e.seq != a.prev_seq + 1:
        if e.seq > a.prev_seq + 1:
            a.problems.append(f"entries {a.prev_seq + 1}–{e.seq - 1} are missing (deleted)")
        else:
            a.problems.append(f"entry {e.seq}: out of order after entry {a.prev_seq}")
    if stored_prev != a.prev_hash:
        a.problems.append(f"entry {e.seq}: prev_hash does not match entry {a.prev_seq}'s hash")
    try:
        recomputed = (
            chain_hash(e.seq, e.created_at, e.draft, e.prev_hash)
            if e.seq > a.v1_through
            else chain_hash_v1(e.seq, e.created_at, e.draft, e.prev_hash, json.loads(row[9]))
        )
    except ValueError as err:  # e.g. a non-finite output cannot be hashed canonically
        recomputed = f"unhashable: {err}"
    added = (e.draft.release_id, e.draft.request_hash, e.draft.principal)
    if e.seq <= a.v1_through and added != (None, None, None):
        a.problems.append(
            f"entry {e.seq}: a schema-1 entry carries a release id, fingerprint or principal "
            "(added after it was written)"
        )
    if recomputed != e.hash:
        a.problems.append(f"entry {e.seq}: content does not match its hash (edited)")
    if anchor is not None and e.seq == anchor[0]:
        a.anchored = e.hash == anchor[1]
    a.prev_seq, a.prev_hash = e.seq, e.hash
    named = {"policy_name": e.draft.policy_name, "unit": e.draft.charge.unit}
    if any(a.binding.get(k) != v for k, v in named.items()):
        a.problems.append(
            f"entry {e.seq}: released under policy {e.draft.policy_name} in "
            f"{e.draft.charge.unit}, but the ledger belongs to {a.binding.get('policy_name')} "
            f"in {a.binding.get('unit')}"
        )
    _check_charge(a, e)
    d = e.draft
    key = (d.epoch, d.region, d.metric)
    a.charges[key] = a.charges.get(key, Fraction(0)) + d.charge.amount
    first = a.epoch_policy.setdefault(d.epoch, d.policy_hash)
    if first != d.policy_hash:
        a.problems.append(
            f"entry {e.seq}: epoch {d.epoch} mixes policies "
            f"({first[:12]}… then {d.policy_hash[:12]}…)"
        )


def _check_charge(a: _Audit, e: Entry) -> None:
    """OpenDP's map at the recorded facts, and the facts its own policy calibrates."""
    d = e.draft
    if d.facts not in a.losses:
        try:
            a.losses[d.facts] = mech.privacy_loss(d.facts)
        except Exception as exc:  # OpenDP refuses malformed facts with its own error types
            a.losses[d.facts] = None
            a.problems.append(f"entry {e.seq}: cannot rebuild its OpenDP measurement: {exc}")
    loss = a.losses[d.facts]
    if loss is not None and loss > d.charge.amount:
        a.problems.append(
            f"entry {e.seq}: OpenDP's map gives {float(loss):.17g} > charged "
            f"{d.charge.text}: the charge under-counts"
        )
    if d.policy_hash not in a.policies:
        a.problems.append(f"entry {e.seq}: its policy {d.policy_hash[:12]}… is not recorded")
        a.policies[d.policy_hash] = None
        return
    policy = a.policies[d.policy_hash]
    if policy is None:
        return  # its policy's problem is reported once
    named = (d.policy_name, d.policy_version, d.charge.unit)
    if named != (policy.name, policy.version, policy.unit):
        a.problems.append(f"entry {e.seq}: names policy {d.policy_name} {d.policy_version} "
                          f"({d.charge.unit}) but its recorded policy is {policy.name} "
                          f"{policy.version} ({policy.unit})")  # fmt: skip
    if d.region != ALL and not policy.regions.admits(d.region):  # review 40: a str subclass
        a.problems.append(  # passed for a declared region before its request was checked
            f"entry {e.seq}: region {d.region!r} is not a region of its policy "
            f"{policy.version}: "
            + ("an open region list admits 1–64 letters, digits, '.', '_' and '-' only"
               if policy.regions.open else "no declared region's budget holds its spend")
        )  # fmt: skip
    try:
        expected, charge = mech.mechanism_facts(policy, d.metric)
    except DpLedgerError as exc:
        a.problems.append(f"entry {e.seq}: its policy cannot release {d.metric!r}: {exc}")
        return
    recorded = _unit_text(d.facts.privacy_unit, d.facts.records)
    declared = _unit_text(expected.privacy_unit, expected.records)
    if recorded != declared:
        a.problems.append(
            f"entry {e.seq}: recorded for privacy unit {recorded} but its policy "
            f"{policy.version} declares {declared}"
        )
        return
    same = (
        expected.mechanism,
        expected.measure,
        expected.sensitivity,
        expected.dimension,
        charge,
    ) == (d.facts.mechanism, d.facts.measure, d.facts.sensitivity, d.facts.dimension,
          d.charge.amount)  # fmt: skip
    # at least the noise its policy calibrates: calibration may find a smaller scale in a
    # later version (the least float whose map fits), never one that charges less
    if not same or d.facts.scale < expected.scale:
        a.problems.append(
            f"entry {e.seq}: mechanism facts or charge differ from what its policy calibrates"
        )


def _unit_text(unit: str, records: int) -> str:
    return f"'{unit}'" if unit == "client" else f"'{unit}' (≤ {records} per person)"


# -- meta, spend, epochs -------------------------------------------------------------------


def _check_meta(
    a: _Audit,
    rows: Iterable[tuple[Any, ...]],
    current: Policy | None,
    anchor: tuple[int, str] | None,
) -> None:
    meta = {str(k): v for k, v in rows}
    head_seq, head_hash = meta.get("head_seq", "0"), meta.get("head_hash", GENESIS)
    if not (isinstance(head_seq, str) and head_seq.isdigit() and len(head_seq) <= 19):
        a.problems.append(f"meta head_seq is unreadable: {head_seq!r}")
    elif not (isinstance(head_hash, str) and _HEX64.fullmatch(head_hash)):
        a.problems.append(f"meta head_hash is unreadable: {head_hash!r}")
    elif int(head_seq) == a.prev_seq and head_hash != a.prev_hash:
        a.problems.append(
            f"chain head is entry {head_seq} with hash {head_hash[:16]}… but entry "
            f"{a.prev_seq}'s hash is {str(a.prev_hash)[:16]}…: the head or the last entry "
            "was rewritten"
        )
    elif (int(head_seq), head_hash) != (a.prev_seq, a.prev_hash):
        a.problems.append(
            f"chain head is entry {head_seq} but the last entry is {a.prev_seq}: entries were "
            "deleted from the end, or the head was rewritten"
        )
    if a.v1_through > a.prev_seq:
        a.problems.append(
            f"meta {CHAIN_V1_THROUGH} names entry {a.v1_through}, past the last entry "
            f"{a.prev_seq}: the meta table was edited"
        )
    binding = () if current is None else (("policy_name", current.name), ("unit", current.unit))
    for key, want in binding:
        if meta.get(key) != want:
            a.problems.append(f"meta {key} is {meta.get(key)!r}, expected {want!r}")
    if anchor is not None and anchor[0] == 0:  # the empty ledger's head, (0, GENESIS):
        a.anchored = anchor[1] == GENESIS  # every chain starts from it (Ledger.head())
    if anchor is not None and a.anchored is not True:
        missing = (
            "missing: the chain was truncated" if a.anchored is None else "not the one anchored"
        )
        a.problems.append(f"entry {anchor[0]} is {missing}")


def _check_spend(a: _Audit, rows: Iterable[tuple[Any, ...]]) -> None:
    stored: dict[tuple[int, str, str], Fraction] = {}
    unreadable = set()
    for epoch, scope, metric, total in rows:
        try:
            if isinstance(epoch, bool) or not isinstance(epoch, int):
                raise TypeError(f"epoch {epoch!r} is not an integer")
            stored[(epoch, str(scope), str(metric))] = stored_amount(total)
        except (ValueError, TypeError, ZeroDivisionError) as e:
            unreadable.add((epoch, str(scope), str(metric)))
            a.problems.append(
                f"spend row (epoch {epoch!r}, scope {scope!r}, metric {metric!r}) is "
                f"unreadable: {e}"
            )
    for key in sorted(set(a.charges) | set(stored)):
        have, want = stored.get(key), a.charges.get(key, Fraction(0))
        if have != want and key not in unreadable:
            a.problems.append(
                f"spend of epoch {key[0]} scope {key[1]!r} metric {key[2]!r} is "
                f"{_shown(have)} but its entries sum to {_shown(want)}"
            )


def _shown(q: Fraction | None) -> str:
    """A sum of (possibly tampered) charges as text: exact unless too long to print."""
    if q is None:
        return "missing"
    if max(q.numerator.bit_length(), q.denominator.bit_length()) < 3000:
        return f"{q}"
    try:
        return f"≈{float(q):.6g}"
    except OverflowError:  # a sum of tampered amounts beyond a double: its size only
        return f"≈10^{round((q.numerator.bit_length() - q.denominator.bit_length()) * 0.30103)}"


def _check_epochs(a: _Audit) -> None:
    by_epoch: dict[int, dict[tuple[str, str], Fraction]] = {}
    for (epoch, scope, metric), v in a.charges.items():
        by_epoch.setdefault(epoch, {})[(scope, metric)] = v
    budgets: list[tuple[int, Policy]] = []
    for epoch in sorted(by_epoch):
        policy = a.policies.get(a.epoch_policy[epoch])
        if policy is None:
            continue  # reported with its entries
        budgets.append((epoch, policy))
        spend = EpochSpend(by_epoch[epoch])
        loss, region = binding_loss(policy, spend.by_scope(), ALL)
        if loss > policy.eval_budget:
            a.problems.append(
                f"epoch {epoch}, region {region}: loss {_shown(loss)} exceeds its policy's "
                f"{policy.eval_budget}"
            )
        for metric in sorted({m for _, m in by_epoch[epoch]}):
            allocation = policy.allocation_of(metric) if metric in policy.metrics else None
            used, region = binding_loss(policy, spend.of_metric(metric), ALL)
            if allocation is not None and used > allocation:
                a.problems.append(
                    f"epoch {epoch}, region {region}: metric {metric} spent {_shown(used)}, "
                    f"over its allocation {allocation}"
                )
    a.notices.extend(budget_notices(budgets))


def budget_notices(history: Iterable[tuple[int, Policy]]) -> list[str]:
    """Where a later policy version loosened what a client may lose, from which epoch.

    ``history`` is ``(first epoch, policy)`` in epoch order. Reported: a larger
    evaluation budget, more rounds per epoch, a pooled allocation replacing per-metric
    ones, a larger δ, a metric whose release costs more, and a new metric.
    """
    out: list[str] = []
    previous: Policy | None = None
    for epoch, policy in history:
        if previous is not None and policy.content_hash != previous.content_hash:
            head = f"from epoch {epoch}, policy {policy.name} version {policy.version}"
            out += [f"{head} {change}" for change in _loosened(previous, policy)]
        previous = policy
    return out


def _loosened(before: Policy, after: Policy) -> list[str]:
    unit = "ε" if after.unit == "epsilon" else "ρ"
    was = f"(version {before.version})"
    out = []
    if after.eval_budget > before.eval_budget:
        out.append(f"raised {unit}_eval from {before.eval_budget} {was} to {after.eval_budget}")
    if after.rounds_per_epoch > before.rounds_per_epoch:
        out.append(
            f"raised rounds_per_epoch from {before.rounds_per_epoch} {was} to "
            f"{after.rounds_per_epoch}"
        )
    if before.allocation == "per_metric" and after.allocation == "pooled":
        out.append(f"pooled the metrics' allocations {was}: a metric may use another's share")
    if after.delta > before.delta:
        b, a = float(before.delta), float(after.delta)  # as short as exact: :g said
        out.append(f"raised δ from {b!r} {was} to {a!r}")  # "from 1e-06 to 1e-06" (review 42)
    for name in after.metrics:
        if name not in before.metrics:
            out.append(f"added metric {name}")
        elif after.release_budget(name) > before.release_budget(name):
            out.append(
                f"raised metric {name}'s {unit} per release from "
                f"{before.release_budget(name)} {was} to {after.release_budget(name)}"
            )
    return out
