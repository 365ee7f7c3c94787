"""The Ledger facade: check, release (atomic spend + OpenDP noise + record), budget views.

Invariants:

- no release leaves :meth:`Ledger.release` unless its spend is committed in the same
  transaction as its record, so a crash can over-count spend, never under-count it
  (noise is drawn just before the write lock is taken and discarded if the re-check
  under the lock refuses: see :mod:`dpledger.ledger.writer`);
- a release is idempotent under its ``release_id``: a retry returns the recorded
  release (same noisy value, same entry), never new noise and never a second charge;
- a read never creates or changes a ledger: only an approved release (or an explicit
  :meth:`Ledger.init`) creates one, and only when opened with ``mode="create"``.

The audit (:meth:`Ledger.verify`) lives in :mod:`dpledger.ledger.audit`.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from dpledger._shown import shown
from dpledger.accounting import EpochSpend, client_loss
from dpledger.approval import (
    MAX_EPOCH,
    ReleaseRequest,
    Verdict,
    refusal,
)
from dpledger.approval.request import well_formed
from dpledger.errors import (
    DpLedgerError,
    InvalidInput,
    LedgerCorrupted,
    LedgerNotFound,
    PolicyMismatch,
)
from dpledger.ledger import audit
from dpledger.ledger.guards import check_guards
from dpledger.ledger.lifetime import Lifetime, lifetime_of
from dpledger.ledger.opening import checked_labels, checked_mode, checked_policy, open_store
from dpledger.ledger.records import GENESIS, Entry, Release, VerifyReport, is_chain_hash
from dpledger.ledger.regions import check_filters, names_text
from dpledger.ledger.schema import head_of
from dpledger.ledger.store import SqlStore
from dpledger.ledger.writer import RoundResult, Writer
from dpledger.policy import ALL, Policy
from dpledger.types import Budget, Mode, PrivacyUnit

__all__ = ["Ledger"]

_LABEL = "label."


def _epoch(epoch: object) -> int:
    if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral):
        raise InvalidInput(f"epoch must be an integer, got {shown(epoch)}")
    if not 0 <= int(epoch) <= MAX_EPOCH:
        raise InvalidInput(f"epoch must lie in [0, 2**63 - 1], got {shown(epoch)}")
    return int(epoch)


class Ledger:
    """A durable privacy-budget ledger bound to one policy. Open with :meth:`open`."""

    def __init__(
        self, store: SqlStore, policy: Policy, *, labels: Mapping[str, str] | None = None
    ) -> None:
        policy = checked_policy(policy, store.mode)  # model_construct: see checked_policy
        self._store = store
        self.policy = policy
        self._binding = {"policy_name": policy.name, "unit": policy.unit}
        self._labels = checked_labels(labels)
        self._checked = False
        self._unsound: DpLedgerError | None = None  # why a ledger opened to read is unsound
        self._writer = Writer(store, policy, self.init, self._exists)
        # an existing ledger's binding and policy are checked at once; opened to read, a
        # failure waits for the first read, so that verify can report it as a problem
        self._exists(audit=store.mode == "read")

    @classmethod
    def open(
        cls,
        target: str | Path | None,
        policy: Policy,
        *,
        mode: Mode = "write",
        labels: Mapping[str, str] | None = None,
    ) -> Ledger:
        """Open the ledger at a SQLite path or ``postgresql://`` URL.

        ``mode``: ``"read"`` (an existing ledger, never written: verify, show, export,
        budget views), ``"write"`` (an existing ledger; the default) or ``"create"`` (a
        new ledger is created by the first approved release, or by :meth:`init`; a
        refused release creates nothing). A missing ledger in ``read``/``write`` mode is
        :class:`~dpledger.errors.LedgerNotFound`; a 0-byte file, a directory or a
        non-dpledger file is refused in every mode. ``labels`` are written into a ledger
        this call creates (e.g. ``{"purpose": "demo"}``). With ``target=None`` the
        ``DPLEDGER_URL`` environment variable is used.
        """
        mode = checked_mode(mode)
        policy = checked_policy(policy, mode)
        labels = checked_labels(labels)
        store = open_store(target, mode)
        try:
            return cls(store, policy, labels=labels)
        except BaseException:
            store.close()
            raise

    def _check_existing(self) -> None:
        self._store.check_binding(self._binding)
        self._writer.check_version()

    def _exists(self, *, audit: bool = False) -> bool:
        """Whether the ledger exists; the first time it does, its binding is checked.

        A ``create`` ledger may find the ledger created meanwhile by someone else (with
        another policy, perhaps): it is checked before anything is read or written.
        ``audit`` lets :meth:`verify` go on with a ledger opened to read whose binding
        failed: it reports the failure among its problems.
        """
        if not self._store.exists():
            return False
        if not self._checked:
            self._store.check_schema()  # another schema cannot even be audited: always fatal
            if self._store.mode != "read":  # dropped guards: no write (read: the audit says)
                check_guards(self._store)
            try:
                self._check_existing()
            except (LedgerCorrupted, PolicyMismatch) as e:
                if self._store.mode != "read":
                    raise
                self._unsound = e
            self._checked = True
        if self._unsound is not None and not audit:
            raise self._unsound
        return True

    def init(self) -> bool:
        """Create the ledger now if it does not exist (what ``dpledger ledger init`` runs).

        Returns True if this call created it. Needs ``mode="create"``.
        """
        if self._exists():
            return False
        meta = {**self._binding, **{_LABEL + k: v for k, v in self._labels.items()}}
        self._store.create(meta)
        self._exists()
        return True

    @property
    def location(self) -> str:
        """Where the ledger lives."""
        return self._store.location

    @property
    def mode(self) -> Mode:
        """How the ledger was opened: ``read``, ``write`` or ``create``."""
        return self._store.mode

    @property
    def exists(self) -> bool:
        """Whether the ledger exists yet (False only for a ``create`` not yet used)."""
        return self._exists()

    @property
    def labels(self) -> dict[str, str]:
        """The labels the ledger was created with (e.g. ``{"purpose": "demo"}``)."""
        if not self._exists():
            return dict(self._labels)
        meta = self._store.meta()
        return {k[len(_LABEL) :]: v for k, v in meta.items() if k.startswith(_LABEL)}

    def close(self) -> None:
        """Close the store's connection."""
        self._store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- approval and release -------------------------------------------------------

    def check(
        self, request: ReleaseRequest, aggregate: object, *, principal: str | None = None
    ) -> Verdict:
        """Dry run: every approval check against committed spend; nothing is spent.

        ``principal``: who would release (as :meth:`release` takes it): a retry of a
        recorded ``release_id`` is a retry only for the principal that recorded it.
        """
        return self._writer.evaluate(request, aggregate, principal).verdict

    def release(
        self, request: ReleaseRequest, aggregate: object, *, principal: str | None = None
    ) -> Release:
        """Check, then atomically re-check the budget, add OpenDP noise, record, commit.

        Raises a :class:`~dpledger.errors.ReleaseRefused` subclass (ledger unchanged)
        when any check fails. The value is returned only after the commit. With a
        ``release_id``, a retry returns the recorded release (no new noise, no charge);
        the same id with another request or aggregate is :class:`ReleaseIdConflict`.
        ``principal`` names who spends; it is recorded in the entry, inside the chain.
        """
        (out,) = self._writer.release([(request, aggregate)], principal=principal)
        return self._committed(out)

    def release_parallel(
        self,
        requests: Mapping[str, tuple[ReleaseRequest, object]],
        *,
        principal: str | None = None,
    ) -> tuple[Release, ...]:
        """Release one metric in several disjoint regions as one atomic parallel release.

        Each region's scope is charged its own ε; all are committed together or none.
        """
        if not isinstance(requests, Mapping):
            raise InvalidInput("requests must map each region to its (request, aggregate)")
        items: list[tuple[ReleaseRequest, object]] = []
        for key, item in requests.items():
            if not (isinstance(item, tuple) and len(item) == 2):
                raise InvalidInput("each value must be a (ReleaseRequest, aggregate) pair")
            req, aggregate = item
            if not isinstance(req, ReleaseRequest):
                raise InvalidInput(f"request must be a ReleaseRequest, got {type(req).__name__}")
            req = well_formed(req)  # a field left out by model_construct: InvalidInput
            if key != req.region:
                raise InvalidInput(
                    f"release_parallel key {key!r} names another region than its request "
                    f"({req.region!r})"
                )
            items.append((req, aggregate))
        metrics = {req.metric for req, _ in items}
        epochs = {req.epoch for req, _ in items}
        if len(items) > 1 and (ALL in requests or len(epochs) > 1 or len(metrics) > 1):
            raise InvalidInput(
                "a parallel release is one metric in distinct regions (not '*') of one epoch"
            )
        outcomes = self._writer.release(items, principal=principal)
        return tuple(self._committed(o) for o in outcomes)

    def release_round(
        self,
        items: Sequence[tuple[ReleaseRequest, object]],
        *,
        partial: bool = False,
        principal: str | None = None,
    ) -> RoundResult:
        """Release every (metric, region) of a round in one transaction and one commit.

        Every budget and allocation is checked under one lock, each request against the
        spend its predecessors in the round add. All or nothing: a refusal raises and
        nothing is recorded — unless ``partial=True``, which commits the approved
        requests and returns each refused one as its :class:`Verdict` in the result.
        The checks run in stages, and the refusal raised is the first (in request
        order) of the earliest stage that refuses: each request's own fields and
        aggregate; release ids repeated in the round; ids already recorded; then, under
        the lock, the epoch's policy, allocations and budget. Each request is idempotent
        under its ``release_id`` (a repeat within the round is decided as a retry in a
        later call would be). Noise is drawn with one OpenDP call per mechanism (e.g.
        one per metric across its regions).
        """
        if isinstance(items, Mapping) or not isinstance(items, Sequence):
            raise InvalidInput("items must be a sequence of (ReleaseRequest, aggregate) pairs")
        if not isinstance(partial, bool):  # strict like the requests: 1 is not True
            raise InvalidInput(f"partial must be True or False, got {shown(partial)}")
        outcomes = self._writer.release(items, partial=partial, principal=principal)
        return RoundResult(outcomes, self.policy.unit)

    @staticmethod
    def _committed(outcome: Release | Verdict) -> Release:
        if isinstance(outcome, Verdict):  # only partial rounds return verdicts
            raise refusal(outcome)
        return outcome

    def budget_changes(self) -> tuple[str, ...]:
        """Where a later policy version raised the evaluation budget, from which epoch."""
        return tuple(audit.budget_notices(self.recorded_policies()))

    # -- budget views ----------------------------------------------------------------

    def _spend(self, epoch: int) -> EpochSpend:
        if not self._exists():
            return EpochSpend.empty()
        return self._store.epoch_spend(_epoch(epoch))

    def epoch_policy(self, epoch: int) -> Policy | None:
        """The policy ``epoch`` is bound to (its first release's, as recorded), or None
        while the epoch has no release. Its budget, unit and regions are the epoch's:
        a release in it under another policy version is refused (``epoch_policy``)."""
        epoch = _epoch(epoch)
        if not self._exists():
            return None
        bound = self._store.epoch_policy(epoch)
        return None if bound is None else self._writer.policy_of(bound[0])

    def _budget_policy(self, epoch: int) -> Policy:
        """The policy whose budget ``epoch``'s views read: the bound one, else this one."""
        return self.epoch_policy(epoch) or self.policy

    def spent(self, epoch: int, region: str = ALL) -> Budget:
        """Exact ε (ρ under zCDP) a client of ``region`` has lost in ``epoch``.

        Everything that touched such a client: its region's releases plus the global
        ones. ``region="*"`` (the default) gives the worst region's client. An unknown
        region is an error, not a full budget. In the unit of the policy the epoch is
        bound to (:meth:`epoch_policy`).
        """
        policy = self._budget_policy(epoch)
        self._known_region(region, policy)
        return Budget(client_loss(self._spend(epoch).by_scope(), region), policy.unit)

    def metric_spent(self, epoch: int, region: str, metric: str) -> Budget:
        """The part of :meth:`spent` that metric ``metric`` used (its allocation's use)."""
        policy = self._budget_policy(epoch)
        self._known_region(region, policy)
        if not isinstance(metric, str):  # a list or dict is unhashable: not a TypeError
            raise InvalidInput(f"metric must be a name (text), got {shown(metric)}")
        if metric not in policy.metrics:  # one the epoch's policy lacks spent nothing there
            self.policy.metric(metric)  # unknown to both: an error
        loss = client_loss(self._spend(epoch).of_metric(metric), region)
        return Budget(loss, policy.unit)

    def _known_region(self, region: str, *policies: Policy | None) -> None:
        """Refuse a region neither this ledger's policy nor ``policies`` (an epoch's) has: a
        region a later version added is known, and its clients lost only the global
        releases in an epoch of an earlier version."""
        if not isinstance(region, str):
            raise InvalidInput(f"region must be a string, got {shown(region)}")
        known = [p for p in (self.policy, *policies) if p is not None]
        if region != ALL and not any(p.regions.admits(region) for p in known):
            names = names_text(n for p in known for n in p.regions.names)  # bounded
            raise InvalidInput(f"unknown region {shown(region)}; the policies' regions: {names}")

    def remaining(self, epoch: int, region: str = ALL) -> Budget:
        """What a client of ``region`` has left of the epoch's evaluation allocation: that
        of the policy the epoch is bound to (:meth:`epoch_policy`), else this ledger's."""
        policy = self._budget_policy(epoch)
        return Budget(policy.eval_budget, policy.unit) - self.spent(epoch, region)

    def spent_by_region(self, epoch: int) -> dict[str, Budget]:
        """The epoch's raw spend per region (``"*"`` = global releases), summed over metrics.

        Not a client's loss: a client of region r has lost ``spent(epoch, r)``.
        """
        unit = self._budget_policy(epoch).unit
        return {r: Budget(v, unit) for r, v in self._spend(epoch).by_scope().items()}

    def spent_by_scope(self, epoch: int) -> dict[str, Budget]:
        """Deprecated name of :meth:`spent_by_region`."""
        warnings.warn(
            "Ledger.spent_by_scope is deprecated: use Ledger.spent_by_region",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.spent_by_region(epoch)

    def lifetime(
        self,
        region: str = ALL,
        *,
        delta: float | None = None,
        privacy_unit: PrivacyUnit | None = None,
    ) -> Lifetime:
        """A client's (or a person's) total loss over all epochs: exact ε or ρ, (ε, δ) views.

        ``delta`` defaults to the policy's; ``privacy_unit`` to the policy's unit (a
        ledger whose policy versions changed unit reports each unit on its own). See
        :mod:`dpledger.ledger.lifetime`.
        """
        entries = self.entries()
        if not any(e.draft.region == region for e in entries):  # else: a removed one's spend
            mine = isinstance(region, str) and (region == ALL or self.policy.regions.admits(region))
            recorded = () if mine else (p for _, p in self.recorded_policies())  # a version's:
            self._known_region(region, *recorded)  # its clients lost the global releases
        unit = self.policy.privacy_unit if privacy_unit is None else privacy_unit
        if unit not in ("client", "record"):
            raise InvalidInput(f"privacy_unit must be 'client' or 'record', got {shown(unit)}")
        if delta is not None and (
            isinstance(delta, bool)
            or not isinstance(delta, int | float)
            or not 0 < float(delta) < 1
        ):
            raise InvalidInput(f"delta must be a number in (0, 1), got {shown(delta)}")
        return lifetime_of(
            entries,
            region,
            self.policy.delta if delta is None else delta,
            regions=self.policy.regions.names,
            unit=self.policy.unit,
            privacy_unit=unit,
        )

    def entries(
        self,
        *,
        epoch: int | None = None,
        region: str | None = None,
        metric: str | None = None,
        after: int = 0,
        limit: int | None = None,
    ) -> list[Entry]:
        """The audit trail in chain order, optionally filtered. ``after``: entries with a
        larger seq (≥ 0); ``limit``: at most this many (≥ 1, or None for all);
        ``region``/``metric``: exact names, a name no policy of the ledger had refused."""
        for name, value in (("after", after), ("limit", limit)):
            # any integer type (numpy's too, as spent() and the planners take), not a bool
            if (value is not None or name == "after") and (
                isinstance(value, bool) or not isinstance(value, numbers.Integral)
            ):
                raise InvalidInput(f"{name} must be an integer, got {shown(value)}")
        after = int(after)
        limit = None if limit is None else int(limit)
        if not 0 <= after <= MAX_EPOCH:
            raise InvalidInput(f"after must be a seq in [0, 2**63 - 1], got {shown(after)}")
        if limit is not None and not 1 <= limit <= MAX_EPOCH:
            raise InvalidInput(f"limit must be at least 1 (or None for all), got {shown(limit)}")
        for name, text in (("region", region), ("metric", metric)):
            if text is not None and not isinstance(text, str):
                raise InvalidInput(f"{name} must be a name (text), got {shown(text)}")
        found = [] if "\0" in f"{region}{metric}" or not self._exists() else self._store.entries(
            epoch=None if epoch is None else _epoch(epoch), region=region, metric=metric,
            after=after, limit=limit,
        )  # fmt: skip
        if not found:  # a typo'd name is refused, not an empty history (review 42)
            check_filters(self, region, metric)
        return found

    def recorded_policies(self) -> list[tuple[int, Policy]]:
        """``(first epoch, policy)`` of each version entries were released under, in order."""
        if not self._exists():
            return []
        return [(e, self._writer.policy_of(h)) for e, h in self._store.policy_epochs()]

    def epochs(self) -> tuple[int, ...]:
        """The epochs that have at least one release, ascending (empty for a new ledger)."""
        if not self._exists():
            return ()
        return tuple(self._store.epochs())

    def __len__(self) -> int:
        return self._store.count() if self._exists() else 0

    def head(self, *, checked: bool = True) -> tuple[int, str]:
        """``(last entry id, its hash)``; ``(0, GENESIS)`` for an empty ledger.

        The meta table records it; ``checked`` (the default) compares that record with the
        last entry and raises :class:`~dpledger.errors.LedgerCorrupted` when they differ
        (an edited meta table, or entries deleted). ``checked=False`` gives the record as
        it is, for a report beside :meth:`verify`'s, which names such damage.
        """
        if not self._exists():
            return 0, GENESIS
        if not checked:
            return head_of(self._store.meta(), self._store.location)
        return self._store.head()

    # -- audit -----------------------------------------------------------------------

    def verify(self, expected_head: tuple[int, str] | None = None) -> VerifyReport:
        """Check the chain, every recorded policy, every charge and every scope's total.

        The chain has no secret: someone able to rewrite every later hash, the head and
        the spend can hide a truncation. ``expected_head`` — an ``(entry_id,
        entry_hash)`` kept outside the database (e.g. from a :class:`Release`) — closes
        that (``(0, GENESIS)``, an empty ledger's head, is matched by every chain).
        Problems name the rows involved; ``report.ok`` is True iff there are none.
        A ledger that does not exist yet is :class:`~dpledger.errors.LedgerNotFound`.
        """
        if expected_head is not None and not (  # a list too (JSON's pair); numpy's ints
            isinstance(expected_head, tuple | list)
            and len(expected_head) == 2
            and isinstance(expected_head[0], numbers.Integral)
            and not isinstance(expected_head[0], bool)
            and isinstance(expected_head[1], str)
            and 0 <= expected_head[0] <= MAX_EPOCH
            and is_chain_hash(expected_head[1])
        ):
            raise InvalidInput("expected_head must be an (entry_id, 64-hex entry_hash) pair")
        if expected_head is not None:  # hex in either case names the same head
            expected_head = (int(expected_head[0]), expected_head[1].lower())
        if not self._exists(audit=True):
            raise LedgerNotFound(f"no ledger at {self.location} yet: there is nothing to verify")
        report = audit.verify(self._store, self.policy, expected_head)
        if self._unsound is None:
            return report
        opening = f"the ledger cannot be opened with this policy: {self._unsound}"
        return VerifyReport(report.entries_checked, (opening, *report.problems), report.notices)
