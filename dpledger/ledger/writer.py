"""The write path: releases checked, noised and recorded in one transaction.

One function serves a single release, a parallel release and a whole round:

1. retries are answered from the record (a release id already committed), without the
   lock and without drawing noise;
2. every other request runs the checks of its own fields and aggregate (the checks of
   the ledger's state run once, in step 4);
3. noise is drawn from OpenDP *before* any ledger state is read, one call per mechanism
   (:func:`~dpledger.mechanisms.apply_many`) — noise drawn for a release that the
   re-check then refuses is discarded, never released, so drawing early costs nothing
   in privacy. SQLite draws it before it takes the lock; PostgreSQL while the round
   trip that takes the lock is under way (``SqlStore.write(meanwhile=...)``), so the
   noise hides that round trip's latency; a writer queued for the lock has drawn its
   noise long before the lock is granted;
4. under the ledger's write lock, the ledger-state checks run again on fresh spend that
   includes the releases staged before them in the same transaction, and the approved
   releases are written together: one transaction, one durable commit.

A round is all or nothing by default: one refusal raises and nothing is recorded. With
``partial=True`` refused requests come back as their :class:`Verdict` and the others
are committed together.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction

from dpledger import mechanisms as mech
from dpledger._shown import shown
from dpledger.accounting import EpochSpend
from dpledger.approval import (
    STATE_CHECKS,
    Assessment,
    Check,
    Prepared,
    ReleaseRequest,
    Verdict,
    admits,
    evaluate,
    fingerprint,
    id_conflict,
    recheck,
    refusal,
)
from dpledger.approval.request import well_formed
from dpledger.errors import (
    CommitUnknown,
    InternalError,
    InvalidInput,
    PolicyMismatch,
    ReleaseIdConflict,
    StoreError,
)
from dpledger.ledger.guards import check_guards
from dpledger.ledger.records import Entry, EntryDraft, Release
from dpledger.ledger.released import draft_of, to_release
from dpledger.ledger.retries import close, is_retry, repeats, retries_record
from dpledger.ledger.schema import policy_conflict, recorded_policy
from dpledger.ledger.staged import refused_by_a_new_ledger, separated
from dpledger.ledger.store import SqlStore
from dpledger.policy import Policy
from dpledger.types import Budget, Unit

__all__ = ["RoundResult", "Writer"]

Item = tuple[ReleaseRequest, object]
_PRINCIPAL = re.compile(r"[!-~]{1,128}")
Outcome = Release | Verdict


@contextmanager
def _unwritten(fresh: list[tuple[int, Prepared]], out: dict[int, Outcome]) -> Iterator[None]:
    """A :class:`CommitUnknown` of a transaction that staged nothing, every request refused
    (none a retry of a recorded one), is a plain StoreError: nothing was recorded."""
    try:
        yield
    except CommitUnknown as e:
        if fresh or not all(isinstance(o, Verdict) for o in out.values()):
            raise
        raise StoreError(
            f"{e.__cause__ or e}: COMMIT failed, of a transaction that wrote nothing (every "
            "request was refused): nothing was recorded, retry"
        ) from e.__cause__


@dataclass(frozen=True, slots=True)
class RoundResult:
    """What one atomic round of releases did, in request order."""

    outcomes: tuple[Outcome, ...]
    unit: Unit = "epsilon"  # the policy's budget unit (of :attr:`charged`)

    @property
    def releases(self) -> tuple[Release, ...]:
        """The committed (or retried) releases, in request order."""
        return tuple(o for o in self.outcomes if isinstance(o, Release))

    @property
    def charged(self) -> Budget:
        """Exact ε (or ρ) this call charged: its releases not :attr:`~Release.retried`,
        each entry once (a repeat of an id within the round gets the same release)."""
        fresh = {r.entry_id: r.charge.amount for r in self.releases if not r.retried}
        return Budget(sum(fresh.values(), Fraction(0)), self.unit)

    @property
    def refusals(self) -> tuple[Verdict, ...]:
        """The refused requests' verdicts, in request order (only with ``partial=True``)."""
        return tuple(o for o in self.outcomes if isinstance(o, Verdict))


def _check_principal(principal: object) -> None:
    """A principal is None or 1-128 printable ASCII characters (it is hashed and recorded)."""
    if principal is not None and not (
        isinstance(principal, str) and _PRINCIPAL.fullmatch(principal)
    ):
        raise InvalidInput(
            f"principal must be 1-128 printable ASCII characters, got {shown(principal)}"
        )


class Writer:
    """Checks, noises and records releases for one ledger (its store and policy)."""

    def __init__(
        self,
        store: SqlStore,
        policy: Policy,
        init: Callable[[], object],
        exists: Callable[[], bool],
    ) -> None:
        self._store = store
        self.policy = policy
        self._init = init
        self._exists = exists  # the ledger's check: binding verified when it first exists
        self._body = json.dumps(policy.model_dump(mode="json"), sort_keys=True)
        self._earlier: dict[str, Policy] = {}  # recorded policies read, by content hash

    def evaluate(
        self, request: ReleaseRequest, aggregate: object, principal: str | None = None
    ) -> Assessment:
        """Every approval check against committed spend (the dry run of ``check``), as
        ``principal`` (who would release) would meet them."""
        if not isinstance(request, ReleaseRequest):
            raise InvalidInput(f"request must be a ReleaseRequest, got {type(request).__name__}")
        request = well_formed(request)  # a field left out by model_construct: InvalidInput
        _check_principal(principal)
        if not self._exists():
            return evaluate(self.policy, request, aggregate, EpochSpend.empty(), None)
        self._store.check_as_writer()  # a dry run reads what the release would write
        if self._store.mode == "read":  # and meets its refusal (a writer checked as it opened)
            check_guards(self._store)
        epoch = request.epoch
        found = evaluate(
            self.policy,
            request,
            aggregate,
            self._store.epoch_spend(epoch),
            self._store.epoch_policy(epoch),
        )
        rid = request.release_id
        hit = self._store.find_releases([rid]).get(rid) if rid is not None else None
        if hit is None:
            if found.verdict.approved:  # the release records the policy: its conflict, too
                self.check_version()
            return found
        return self._as_retry(request, aggregate, found, hit, principal)

    def _as_retry(
        self,
        request: ReleaseRequest,
        aggregate: object,
        found: Assessment,
        hit: Entry,
        principal: str | None,
    ) -> Assessment:
        """The dry run of a request whose release id is recorded: what a release would do.

        A retry (the same request from the same ``principal``, an aggregate the recorded
        value could come from: as :meth:`replay` decides) is approved at no charge — the
        release returns the recorded value; anything else fails as the conflict it is,
        naming no entry (the caller may be another principal). The budget checks are left
        out: a retry spends nothing. A retry this policy would refuse (one recorded under
        an earlier version) is approved too, its checks shown as not applied.
        """
        rest = tuple(c for c in found.verdict.checks if c.name not in STATE_CHECKS)
        rid, entry = request.release_id, hit.entry_id
        if is_retry(found.verdict.request, aggregate, hit, principal):
            self.policy_of(hit.draft.policy_hash)  # a retry's release reads it: so does this
            said = (
                f"{rid!r} is entry {entry} (policy {hit.draft.policy_name} "
                f"{hit.draft.policy_version}): a release returns its value and charges nothing"
            )
            kept = tuple(  # a retry this policy refuses (recorded under an earlier one)
                c if c.passed else Check(c.name, True, f"not applied to a retry ({c.reason})")
                for c in rest
            )
            checks = (*kept, Check("release_id", True, said))
            return Assessment(
                dataclasses.replace(
                    found.verdict, checks=checks, charge=Budget.zero(self.policy.unit)
                )
            )
        if evaluate(self.policy, request, aggregate, None).prepared is None:
            return Assessment(dataclasses.replace(found.verdict, checks=rest))  # refused alone
        said = (
            f"{rid!r} was used for another request, aggregate or caller: a release "
            "raises ReleaseIdConflict; use a new release_id"
        )
        checks = (*rest, Check("release_id", False, said))
        return Assessment(dataclasses.replace(found.verdict, checks=checks))

    def check_version(self) -> None:
        """Refuse a policy whose version the ledger recorded with other contents."""
        p = self.policy
        if any(h != p.content_hash for h in self._store.recorded_policy_hashes(p.version)):
            raise PolicyMismatch(message=policy_conflict(self._store.location, p.name, p.version))

    def release(
        self, items: Sequence[Item], *, partial: bool = False, principal: str | None = None
    ) -> tuple[Outcome, ...]:
        """Release ``items`` in one transaction; see the module docstring.

        ``principal`` (who spends: e.g. the service's authenticated key) is recorded with
        every entry, inside the hash chain.
        """
        _check_principal(principal)
        if self._store.mode == "read":
            raise InvalidInput(
                f"{self._store.location} was opened for reading (mode='read'): open it with "
                "mode='write' to release"
            )
        where = "request {} of the round (from 0): " if len(items) > 1 else ""  # review 43
        for i, item in enumerate(items):
            if not (isinstance(item, tuple) and len(item) == 2):
                said = "each item must be a (ReleaseRequest, aggregate) pair"
                raise InvalidInput(where.format(i) + said)
            if not isinstance(item[0], ReleaseRequest):
                said = f"request must be a ReleaseRequest, got {type(item[0]).__name__}"
                raise InvalidInput(where.format(i) + said)
            try:  # a field model_construct left out or unchecked: named before any work
                well_formed(item[0])
            except InvalidInput as e:
                raise InvalidInput(where.format(i) + str(e)) from None
        outcomes: dict[int, Outcome] = {}
        prepared: dict[int, Prepared] = {}
        refused: dict[int, Verdict] = {}
        early: dict[int, int] = {}  # a refused request -> the approved one it repeats
        firsts: dict[str, int] = {}  # a release id -> its first approved request
        for i, (req, agg) in enumerate(items):
            # the checks of the request and aggregate; the ledger-state checks (epoch
            # policy, allocation, budget) run once, under the lock, on fresh spend
            found = evaluate(self.policy, req, agg, None)
            rid = found.verdict.request.release_id
            if found.prepared is not None:
                prepared[i] = found.prepared
                if rid is not None:
                    firsts.setdefault(rid, i)
            elif rid in firsts and repeats(found.verdict.request, agg, prepared[firsts[rid]],
                                           principal):  # fmt: skip
                early[i] = firsts[rid]  # as in separate calls: a retry of the earlier one
            else:
                refused[i] = found.verdict
        recorded = self._recorded(items, refused, principal)
        for i, verdict in refused.items():  # in request order: the first refusal raises
            if i in recorded:  # a retry this policy would refuse: the record answers
                outcomes[i] = recorded[i]
            elif partial:
                outcomes[i] = verdict
            else:
                raise refusal(verdict, index=i if len(items) > 1 else None)
        twins = self._twins(prepared, principal, partial, outcomes) | early
        for i in [*twins, *outcomes]:
            prepared.pop(i, None)
        outcomes.update(self._retries(prepared, principal, partial, len(items)))
        for i in outcomes:
            prepared.pop(i, None)
        if prepared:
            outcomes.update(self._commit(prepared, partial, principal, len(items)))
        for i, first in twins.items():  # a retry of the first: this request charged nothing
            o = outcomes[first]
            outcomes[i] = dataclasses.replace(o, retried=True) if isinstance(o, Release) else o
        return tuple(outcomes[i] for i in range(len(items)))

    def _recorded(
        self, items: Sequence[Item], refused: dict[int, Verdict], principal: str | None
    ) -> dict[int, Release]:
        """The recorded releases refused requests retry, if any do (:func:`is_retry`, one
        lookup): a release id committed under an earlier policy answers whatever this one
        checks."""
        ids = {i: rid for i, v in refused.items() if (rid := v.request.release_id)}
        if not ids or not self._exists():
            return {}
        found = self._store.find_releases(sorted(set(ids.values())))
        out: dict[int, Release] = {}
        for i, rid in ids.items():
            hit, request = found.get(rid), refused[i].request
            if hit is not None and is_retry(request, items[i][1], hit, principal):
                spec = self.policy_of(hit.draft.policy_hash).metric(request.metric)
                out[i] = to_release(request, spec, hit, retried=True)
        return out

    def _twins(
        self,
        prepared: dict[int, Prepared],
        principal: str | None,
        partial: bool,
        outcomes: dict[int, Outcome],
    ) -> dict[int, int]:
        """Repeats of a release id within one call: each maps to the first request.

        A repeat of the same request (fields and principal) with an aggregate within
        :func:`.retry_tolerance` noise scales of the first's is a retry of the first: it
        gets the first's release, whatever that is (a new one, or a recorded one the first
        retries). Anything else under the same id is :class:`ReleaseIdConflict` (with
        ``partial``, its refused verdict goes into ``outcomes``). A later retry's tolerance,
        measured from the first's aggregate rather than a noisy value (no twin decision
        depends on the noise): the rules differ only tens of noise scales apart, where no
        true retry is; rounding (float32 against float64) is a retry either way.
        """
        first: dict[str, int] = {}
        twins: dict[int, int] = {}
        for i, p in prepared.items():
            rid = p.verdict.request.release_id
            if rid is None:
                continue
            if rid not in first:
                first[rid] = i
                continue
            original = prepared[first[rid]]
            same = fingerprint(p.verdict.request, principal) == fingerprint(
                original.verdict.request, principal
            ) and close(p, original)
            if not same:
                conflict = id_conflict(p.verdict.request, self.policy.unit)
                if not partial:  # a twin is in a round: it names its request
                    raise refusal(conflict, index=i)
                outcomes[i] = conflict
                continue
            twins[i] = first[rid]
        return twins

    def _retries(
        self, prepared: dict[int, Prepared], principal: str | None, partial: bool, size: int
    ) -> dict[int, Outcome]:
        """Requests whose release id is already recorded, answered from the record (with
        ``partial``, a conflicting one as its refused verdict)."""
        ids = [rid for p in prepared.values() if (rid := p.verdict.request.release_id)]
        if not ids or not self._exists():
            return {}
        found = self._store.find_releases(ids)
        out: dict[int, Outcome] = {}
        for i, p in prepared.items():
            rid = p.verdict.request.release_id
            if rid not in found:
                continue
            try:
                out[i] = self.replay(p, found[rid], principal, i if size > 1 else None)
            except ReleaseIdConflict as e:
                if not partial or e.verdict is None:
                    raise
                out[i] = e.verdict
        return out

    def _commit(
        self, prepared: dict[int, Prepared], partial: bool, principal: str | None, size: int
    ) -> dict[int, Outcome]:
        drafts: dict[int, EntryDraft] = {}  # noised, not yet checked against the ledger

        def draw() -> None:
            noise = self._noise(prepared)
            drafts.update(
                {i: draft_of(self.policy, p, noise[i], principal) for i, p in prepared.items()}
            )

        later: Callable[[], None] | None = draw
        if not self._exists():
            draw()
            later = None
            refused = refused_by_a_new_ledger(self.policy, prepared, partial, size)
            if len(refused) == len(prepared):
                return dict(refused)  # nothing to record: no ledger is created
            self._init()  # the first approved release creates the ledger (mode "create")
        out: dict[int, Outcome] = {}
        fresh: list[tuple[int, Prepared]] = []
        requests = [p.verdict.request for p in prepared.values()]
        epochs = {r.epoch for r in requests}
        # the state is read with the lock; the noise is drawn before any state is read
        with _unwritten(fresh, out), self._store.write(epochs, meanwhile=later) as txn:
            txn.load(epochs, [r.release_id for r in requests if r.release_id])
            committed = {e: txn.spend(e) for e in epochs}  # before this call stages any
            for i, p in prepared.items():
                req = p.verdict.request
                if req.release_id is not None:
                    hit = txn.find_release(req.release_id)
                    if hit is not None:  # a concurrent twin committed it first
                        try:
                            out[i] = self.replay(p, hit, principal, i if size > 1 else None)
                        except ReleaseIdConflict as e:  # another request took the id
                            if not partial or e.verdict is None:
                                raise
                            out[i] = e.verdict
                        continue
                binding = txn.epoch_policy(req.epoch)
                if not admits(self.policy, p, txn.live_spend(req.epoch), binding):
                    # the refusal's verdict, with every check's reason, only when refused
                    late = recheck(self.policy, p, txn.spend(req.epoch), binding)
                    if late.approved:  # admits and recheck decide alike: unreachable
                        raise InternalError(f"approval disagreed with itself: {late.summary()}")
                    late, staged, scope = separated(
                        self.policy, late, committed[req.epoch], partial
                    )
                    if partial:
                        out[i] = late
                        continue
                    raise refusal(late, index=i if size > 1 else None, staged=staged, scope=scope)
                txn.stage(drafts[i])
                fresh.append((i, p))
            if fresh:  # a round refused whole writes nothing, not even the policy (audit 5, F7)
                txn.record_policy(
                    self.policy.content_hash, self.policy.name, self.policy.version, self._body
                )
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
            if not all(math.isfinite(x) for row in noisy for x in row):  # noise_range passed
                raise InternalError(
                    f"a noise draw at scale {facts.scale:.3g} overflowed a double, which the "
                    "noise_range check makes a chance below 1e-300 (none of this call's "
                    f"{len(prepared)} new release(s) recorded, nothing charged): please report it"
                )
            out.update(zip(members, noisy, strict=True))
        return out

    def replay(
        self, p: Prepared, hit: Entry, principal: str | None, index: int | None = None
    ) -> Release:
        """The recorded release a retry gets back; a reused id is a conflict.

        A retry is the same request (fields and principal) with an aggregate that the
        recorded release could have come from: every coordinate within
        :func:`.retry_tolerance` noise scales of the recorded noisy value. The decision reads
        only the caller's own aggregate and the public release — never a digest of the
        original aggregate, which anyone who reads the ledger could test guesses against.
        """
        req = p.verdict.request
        if not retries_record(req, p.values, hit, principal):
            raise refusal(id_conflict(req, self.policy.unit), index=index)
        policy = self.policy_of(hit.draft.policy_hash)
        return to_release(req, policy.metric(req.metric), hit, retried=True)

    def policy_of(self, policy_hash: str) -> Policy:
        """The policy an entry was released under (recorded in the ledger)."""
        if policy_hash == self.policy.content_hash:
            return self.policy
        if policy_hash in self._earlier:
            return self._earlier[policy_hash]
        body = self._store.policy_body(policy_hash)
        read = recorded_policy(body, policy_hash, self._store.location)
        self._earlier[policy_hash] = read
        return read
