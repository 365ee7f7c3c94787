"""The write path: releases checked, noised and recorded in one transaction.

One function serves a single release, a parallel release and a whole round:

1. retries are answered from the record (a release id already committed), without the
   lock and without drawing noise;
2. every other request runs the checks of its own fields and aggregate (the checks of
   the ledger's state run once, in step 4);
3. noise is drawn from OpenDP *before* the lock is taken, one call per mechanism
   (:func:`~dpledger.mechanisms.apply_many`) — noise drawn for a release that the
   re-check then refuses is discarded, never released, so drawing early costs nothing
   in privacy and keeps the lock short;
4. under the ledger's write lock, the ledger-state checks run again on fresh spend that
   includes the releases staged before them in the same transaction, and the approved
   releases are written together: one transaction, one durable commit.

A round is all or nothing by default: one refusal raises and nothing is recorded. With
``partial=True`` refused requests come back as their :class:`Verdict` and the others
are committed together.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpledger import mechanisms as mech
from dpledger.accounting import EpochSpend
from dpledger.approval import (
    Prepared,
    ReleaseRequest,
    Verdict,
    evaluate,
    fingerprint,
    id_conflict,
    recheck,
    refusal,
)
from dpledger.errors import InvalidInput, LedgerCorrupted, ReleaseIdConflict
from dpledger.ledger.records import Entry, EntryDraft, Release
from dpledger.ledger.store import SqlStore
from dpledger.policy import MetricSpec, Policy

__all__ = ["RoundResult", "Writer"]

Item = tuple[ReleaseRequest, object]
Outcome = Release | Verdict


@dataclass(frozen=True, slots=True)
class RoundResult:
    """What one atomic round of releases did, in request order."""

    outcomes: tuple[Outcome, ...]

    @property
    def releases(self) -> tuple[Release, ...]:
        """The committed (or retried) releases, in request order."""
        return tuple(o for o in self.outcomes if isinstance(o, Release))

    @property
    def refusals(self) -> tuple[Verdict, ...]:
        """The refused requests' verdicts, in request order (only with ``partial=True``)."""
        return tuple(o for o in self.outcomes if isinstance(o, Verdict))


def _values(aggregate: object) -> npt.NDArray[np.float64] | None:
    """The aggregate as flat float64, for a retry's fingerprint (None if not numeric)."""
    try:
        return np.asarray(aggregate, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError, OverflowError):
        return None


class Writer:
    """Checks, noises and records releases for one ledger (its store and policy)."""

    def __init__(self, store: SqlStore, policy: Policy, init: Callable[[], object]) -> None:
        self._store = store
        self.policy = policy
        self._init = init
        self._body = json.dumps(policy.model_dump(mode="json"), sort_keys=True)

    def evaluate(self, request: ReleaseRequest, aggregate: object) -> Verdict | Prepared:
        """Every approval check against committed spend (the dry run of ``check``)."""
        if not isinstance(request, ReleaseRequest):
            raise InvalidInput(f"request must be a ReleaseRequest, got {type(request).__name__}")
        if not self._store.exists():
            return evaluate(self.policy, request, aggregate, EpochSpend.empty(), None)
        epoch = request.epoch
        return evaluate(
            self.policy,
            request,
            aggregate,
            self._store.epoch_spend(epoch),
            self._store.epoch_policy(epoch),
        )

    def release(self, items: Sequence[Item], *, partial: bool = False) -> tuple[Outcome, ...]:
        """Release ``items`` in one transaction; see the module docstring."""
        if self._store.mode == "read":
            raise InvalidInput(
                f"{self._store.location} was opened for reading (mode='read'): open it with "
                "mode='write' to release"
            )
        for item in items:
            if not (isinstance(item, tuple) and len(item) == 2):
                raise InvalidInput("each item must be a (ReleaseRequest, aggregate) pair")
            if not isinstance(item[0], ReleaseRequest):
                raise InvalidInput(
                    f"request must be a ReleaseRequest, got {type(item[0]).__name__}"
                )
        outcomes: dict[int, Outcome] = self._retries(items)
        prepared: dict[int, Prepared] = {}
        for i, (req, agg) in enumerate(items):
            if i in outcomes:
                continue
            # the checks of the request and aggregate; the ledger-state checks (epoch
            # policy, allocation, budget) run once, under the lock, on fresh spend
            result = evaluate(self.policy, req, agg, None)
            if isinstance(result, Prepared):
                prepared[i] = result
            elif partial:
                outcomes[i] = result
            else:
                raise refusal(result)
        if prepared:
            outcomes.update(self._commit(prepared, partial))
        return tuple(outcomes[i] for i in range(len(items)))

    def _retries(self, items: Sequence[Item]) -> dict[int, Outcome]:
        """Requests whose release id is already recorded, answered from the record."""
        ids = [req.release_id for req, _ in items if req.release_id is not None]
        if not ids or not self._store.exists():
            return {}
        found = self._store.find_releases(ids)
        return {
            i: self.replay(req, _values(agg), found[req.release_id])
            for i, (req, agg) in enumerate(items)
            if req.release_id in found
        }

    def _commit(self, prepared: dict[int, Prepared], partial: bool) -> dict[int, Outcome]:
        noise = self._noise(prepared)
        if not self._store.exists():
            self._init()  # the first approved release creates the ledger (mode "create")
        out: dict[int, Outcome] = {}
        fresh: list[tuple[int, Prepared]] = []
        requests = [p.verdict.request for p in prepared.values()]
        with self._store.write() as txn:
            txn.load({r.epoch for r in requests}, [r.release_id for r in requests if r.release_id])
            txn.record_policy(
                self.policy.content_hash, self.policy.name, self.policy.version, self._body
            )
            for i, p in prepared.items():
                req = p.verdict.request
                if req.release_id is not None:
                    hit = txn.find_release(req.release_id)
                    if hit is not None:  # a concurrent twin committed it first
                        out[i] = self.replay(req, p.values, hit)
                        continue
                late = recheck(self.policy, p, txn.spend(req.epoch), txn.epoch_policy(req.epoch))
                if not late.approved:
                    if partial:
                        out[i] = late
                        continue
                    raise refusal(late)
                txn.stage(self._draft(p, noise[i]))
                fresh.append((i, p))
            entries = txn.flush()
        for (i, p), entry in zip(fresh, entries, strict=True):
            out[i] = to_release(p.verdict.request, p.spec, entry)
        return out

    @staticmethod
    def _noise(prepared: dict[int, Prepared]) -> dict[int, tuple[float, ...]]:
        """OpenDP noise for every prepared release: one call per distinct mechanism."""
        groups: dict[mech.MechanismFacts, list[int]] = {}
        for i, p in prepared.items():
            groups.setdefault(p.facts, []).append(i)
        out: dict[int, tuple[float, ...]] = {}
        for facts, members in groups.items():
            noisy = mech.apply_many(facts, [prepared[i].values for i in members])
            out.update({i: tuple(v.tolist()) for i, v in zip(members, noisy, strict=True)})
        return out

    def replay(
        self, request: ReleaseRequest, values: npt.NDArray[np.float64] | None, hit: Entry
    ) -> Release:
        """The recorded release a retry gets back; a reused id is a conflict."""
        same = values is not None and hit.draft.request_hash == fingerprint(request, values)
        if not same:
            raise ReleaseIdConflict(id_conflict(request, self.policy.unit))
        policy = self.policy_of(hit.draft.policy_hash)
        return to_release(request, policy.metric(request.metric), hit)

    def policy_of(self, policy_hash: str) -> Policy:
        """The policy an entry was released under (recorded in the ledger)."""
        if policy_hash == self.policy.content_hash:
            return self.policy
        location = self._store.location
        body = self._store.policy_body(policy_hash)
        if body is None:
            raise LedgerCorrupted(f"policy {policy_hash[:12]}… is not recorded in {location}")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # its warnings were shown when it was in use
                data = json.loads(body)
                return Policy.from_mapping(data, source=f"recorded policy {policy_hash[:12]}")
        except (ValueError, RecursionError) as e:
            raise LedgerCorrupted(
                f"the recorded policy {policy_hash[:12]}… in {location} is unreadable "
                f"({e}); run `dpledger ledger verify`"
            ) from None

    def _draft(self, p: Prepared, output: tuple[float, ...]) -> EntryDraft:
        req = p.verdict.request
        return EntryDraft(
            epoch=req.epoch,
            scope=req.region,
            metric=req.metric,
            policy_name=self.policy.name,
            policy_version=self.policy.version,
            policy_hash=self.policy.content_hash,
            edges_version=p.spec.edges_version,
            facts=p.facts,
            unit=self.policy.unit,
            charge=p.verdict.charge or Fraction(0),
            cohort=req.cohort,
            output=output,
            release_id=req.release_id,
            request_hash=fingerprint(req, p.values),
        )


def to_release(request: ReleaseRequest, spec: MetricSpec, entry: Entry) -> Release:
    """The :class:`Release` a committed entry answers ``request`` with."""
    facts = entry.draft.facts
    return Release.make(
        request=request,
        entry_id=entry.entry_id,
        entry_hash=entry.hash,
        noisy_sum=np.asarray(entry.draft.output, dtype=np.float64),
        bar=spec.bar,
        bar_factor=mech.bar_factor(spec.bar, facts.mechanism),
        charge=entry.draft.charge,
        unit=entry.draft.unit,
        facts=facts,
        kind=spec.kind,
    )
