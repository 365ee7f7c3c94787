"""The Ledger facade: check, release (atomic spend + OpenDP noise + record), audit.

Invariant: no release leaves :meth:`Ledger.release` unless its spend is committed in
the same transaction as its record; the noise is drawn inside that transaction, so a
crash can over-count spend, never under-count it.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from types import TracebackType

import numpy as np

from dpledger import mechanisms as mech
from dpledger.accounting import check_budget, client_loss, regions_in_view, spent_by_scope
from dpledger.approval import Prepared, ReleaseRequest, Verdict, evaluate, mechanism_facts, refusal
from dpledger.errors import InvalidInput, LedgerCorrupted, StoreError
from dpledger.ledger.lifetime import Lifetime, lifetime_of
from dpledger.ledger.records import GENESIS, Entry, EntryDraft, Release, VerifyReport, chain_hash
from dpledger.ledger.store import SqlStore
from dpledger.policy import ALL, Policy

__all__ = ["Ledger"]

_BATCH = 2000


def _open_store(target: str | Path | None) -> SqlStore:
    target = target if target is not None else os.environ.get("DPLEDGER_URL")
    if target is None:
        raise InvalidInput(
            "no ledger given: pass a SQLite path or postgresql:// URL, or set DPLEDGER_URL"
        )
    text = str(target)
    if text.startswith(("postgresql://", "postgres://")):
        from dpledger.ledger.postgres import PostgresStore  # optional extra

        return PostgresStore(text)
    from dpledger.ledger.sqlite import SqliteStore

    return SqliteStore(text)


class Ledger:
    """A durable privacy-budget ledger bound to one policy. Open with :meth:`open`."""

    def __init__(self, store: SqlStore, policy: Policy) -> None:
        self._store = store
        self.policy = policy
        body = json.dumps(policy.model_dump(mode="json"), sort_keys=True)
        store.init_schema(
            {"policy_name": policy.name, "unit": policy.unit},
            (policy.content_hash, policy.version, body),
        )

    @classmethod
    def open(cls, target: str | Path | None, policy: Policy) -> Ledger:
        """Open (creating if new) the ledger at a SQLite path or ``postgresql://`` URL.

        With ``target=None`` the ``DPLEDGER_URL`` environment variable is used.
        """
        return cls(_open_store(target), policy)

    @property
    def location(self) -> str:
        """Where the ledger lives."""
        return self._store.location

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

    def check(self, request: ReleaseRequest, aggregate: object) -> Verdict:
        """Dry run: every approval check against committed spend; nothing is spent."""
        result = self._evaluate(request, aggregate)
        return result.verdict if isinstance(result, Prepared) else result

    def _evaluate(self, request: ReleaseRequest, aggregate: object) -> Verdict | Prepared:
        epoch = request.epoch
        return evaluate(
            self.policy,
            request,
            aggregate,
            self._store.spent(epoch),
            self._store.epoch_policy(epoch),
        )

    def release(self, request: ReleaseRequest, aggregate: object) -> Release:
        """Check, then atomically re-check the budget, add OpenDP noise, record, commit.

        Raises a :class:`~dpledger.errors.ReleaseRefused` subclass (ledger unchanged)
        when any check fails. The value is returned only after the commit.
        """
        return self.release_parallel({request.region: (request, aggregate)})[0]

    def release_parallel(
        self, requests: Mapping[str, tuple[ReleaseRequest, object]]
    ) -> tuple[Release, ...]:
        """Release one metric in several disjoint regions as one atomic parallel release.

        Each region's scope is charged its own ε; all are committed together or none.
        """
        for key, (req, _) in requests.items():
            if key != req.region:
                raise InvalidInput(
                    f"release_parallel key {key!r} names another region than its request "
                    f"({req.region!r})"
                )
        prepared = [self._prepare(req, agg) for req, agg in requests.values()]
        scopes = [p.verdict.request.region for p in prepared]
        epochs = {p.verdict.request.epoch for p in prepared}
        if len(prepared) > 1 and (
            len(set(scopes)) != len(scopes) or ALL in scopes or len(epochs) > 1
        ):
            raise InvalidInput("a parallel release needs distinct regions (not '*') in one epoch")
        with self._store.write() as txn:
            drafts: list[EntryDraft] = []
            for p in prepared:
                req = p.verdict.request
                spent, bound = txn.spent(req.epoch), txn.epoch_policy(req.epoch)
                charge = p.verdict.charge or Fraction(0)
                stale = bound is not None and bound[0] != self.policy.content_hash
                if (
                    stale
                    or not check_budget(self.policy, spent, req.epoch, req.region, charge).fits
                ):
                    late = evaluate(self.policy, req, p.values, spent, bound)
                    raise refusal(late if isinstance(late, Verdict) else late.verdict)
                noisy = mech.apply(p.facts, p.values)
                drafts.append(self._draft(p, tuple(noisy.tolist())))
            entries = txn.append(drafts)
        return tuple(self._to_release(p, e) for p, e in zip(prepared, entries, strict=True))

    def _prepare(self, request: ReleaseRequest, aggregate: object) -> Prepared:
        result = self._evaluate(request, aggregate)
        if isinstance(result, Verdict):
            raise refusal(result)
        return result

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
        )

    def _to_release(self, p: Prepared, entry: Entry) -> Release:
        return Release.make(
            request=p.verdict.request,
            entry_id=entry.entry_id,
            entry_hash=entry.hash,
            noisy_sum=np.asarray(entry.draft.output, dtype=np.float64),
            bar=p.spec.bar,
            bar_factor=mech.bar_factor(p.spec.bar, p.facts.mechanism),
            charge=entry.draft.charge,
            unit=entry.draft.unit,
            facts=p.facts,
            kind=p.spec.kind,
        )

    # -- budget views ----------------------------------------------------------------

    def spent(self, epoch: int, region: str = ALL) -> Fraction:
        """Exact ε (ρ under zCDP) a client of ``region`` has lost in ``epoch``.

        That is ``spent(ALL) + spent(region)``; for ``region="*"``, the worst region's.
        An unknown region is an error, not a full budget.
        """
        self._known_region(region)
        return client_loss(self._store.spent(epoch), region)

    def _known_region(self, region: str) -> None:
        if region != ALL and not self.policy.regions.admits(region):
            names = list(self.policy.regions.names) or "any valid name (open regions)"
            raise InvalidInput(f"unknown region {region!r}; this policy's regions: {names}")

    def remaining(self, epoch: int, region: str = ALL) -> Fraction:
        """What a client of ``region`` has left of the epoch's evaluation allocation."""
        return max(self.policy.eval_budget - self.spent(epoch, region), Fraction(0))

    def spent_by_scope(self, epoch: int) -> dict[str, Fraction]:
        """The epoch's raw spend per scope (``"*"`` = global releases)."""
        return self._store.spent(epoch)

    def lifetime(self, region: str = ALL, *, delta: float | None = None) -> Lifetime:
        """A client's total loss over all epochs: basic ε, zCDP (ε, δ) and PLD if installed.

        ``delta`` defaults to the policy's. See :mod:`dpledger.ledger.lifetime`.
        """
        return lifetime_of(
            self._store.entries(),
            region,
            self.policy.delta if delta is None else delta,
            regions=self.policy.regions.names,
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
        """The audit trail in chain order, optionally filtered."""
        return self._store.entries(
            epoch=epoch, scope=region, metric=metric, after=after, limit=limit
        )

    def __len__(self) -> int:
        return self._store.count()

    def head(self) -> tuple[int, str]:
        """``(last entry id, its hash)``; ``(0, GENESIS)`` for an empty ledger."""
        meta = self._store.meta()
        return int(meta.get("head_seq", 0)), meta.get("head_hash", GENESIS)

    # -- audit -----------------------------------------------------------------------

    def verify(self, expected_head: tuple[int, str] | None = None) -> VerifyReport:
        """Check the hash chain, re-derive every charge via OpenDP, and every scope's total.

        The chain has no secret: someone able to rewrite every later hash, the head and
        the spend can hide a truncation. ``expected_head`` — an ``(entry_id,
        entry_hash)`` kept outside the database (e.g. from a :class:`Release`) — closes
        that: the chain must contain exactly that entry. All reads happen in one
        snapshot, so concurrent writers cause no false alarms. Problems name the entry
        ids involved; ``report.ok`` is True iff there are none.
        """
        problems: list[str] = []
        prev_hash, prev_seq, n = GENESIS, 0, 0
        charges: list[tuple[tuple[int, str], Fraction]] = []
        loss_cache: dict[mech.MechanismFacts, Fraction] = {}
        epoch_policy: dict[int, str] = {}
        anchored: bool | None = None
        after = 0
        try:
            with self._store.snapshot():
                while batch := self._store.entries(after=after, limit=_BATCH):
                    for e in batch:
                        n += 1
                        problems.extend(self._verify_entry(e, prev_seq, prev_hash, loss_cache))
                        charges.append(((e.draft.epoch, e.draft.scope), e.draft.charge))
                        first = epoch_policy.setdefault(e.draft.epoch, e.draft.policy_hash)
                        if first != e.draft.policy_hash:
                            problems.append(
                                f"entry {e.seq}: epoch {e.draft.epoch} mixes policies "
                                f"({first[:12]}… then {e.draft.policy_hash[:12]}…)"
                            )
                        if expected_head is not None and e.seq == expected_head[0]:
                            anchored = e.hash == expected_head[1]
                        prev_seq, prev_hash = e.seq, e.hash
                    after = batch[-1].seq
                meta = self._store.meta()
                stored_spend = self._store.all_spent()
        except (StoreError, LedgerCorrupted) as e:
            return VerifyReport(n, (*problems, f"store unreadable: {e}"))
        if (int(meta.get("head_seq", 0)), meta.get("head_hash", GENESIS)) != (prev_seq, prev_hash):
            problems.append(
                f"chain head is entry {meta.get('head_seq')} but the last entry is {prev_seq}: "
                "entries were deleted from the end"
            )
        if expected_head is not None and anchored is not True:
            problems.append(
                f"entry {expected_head[0]} is "
                + (
                    "missing: the chain was truncated"
                    if anchored is None
                    else "not the one anchored"
                )
            )
        problems.extend(self._verify_spend(charges, stored_spend, epoch_policy))
        return VerifyReport(n, tuple(problems))

    def _recorded_policy(self, policy_hash: str) -> Policy | None:
        """The policy with this content hash, as recorded when the ledger was opened with it."""
        if policy_hash == self.policy.content_hash:
            return self.policy
        body = self._store.policy_body(policy_hash)
        if body is None:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its warnings were shown when it was in use
            return Policy.from_mapping(
                json.loads(body), source=f"recorded policy {policy_hash[:12]}"
            )

    def _verify_entry(
        self, e: Entry, prev_seq: int, prev_hash: str, cache: dict[mech.MechanismFacts, Fraction]
    ) -> list[str]:
        out: list[str] = []
        if e.seq != prev_seq + 1:
            out.append(f"entries {prev_seq + 1}–{e.seq - 1} are missing (deleted)")
        if e.prev_hash != prev_hash:
            out.append(f"entry {e.seq}: prev_hash does not match entry {prev_seq}'s hash")
        if chain_hash(e.seq, e.created_at, e.draft, e.prev_hash) != e.hash:
            out.append(f"entry {e.seq}: content does not match its hash (edited)")
        facts = e.draft.facts
        if facts not in cache:
            try:
                cache[facts] = mech.privacy_loss(facts)
            except Exception as exc:  # OpenDP refuses malformed facts
                out.append(f"entry {e.seq}: cannot rebuild its OpenDP measurement: {exc}")
                return out
        if cache[facts] > e.draft.charge:
            out.append(
                f"entry {e.seq}: OpenDP's map gives {float(cache[facts]):.17g} > charged "
                f"{e.draft.charge}: the charge under-counts"
            )
        if (
            e.draft.policy_hash == self.policy.content_hash
            and e.draft.metric in self.policy.metrics
        ):
            expected, charge = mechanism_facts(self.policy, e.draft.metric)
            if (expected.sensitivity, expected.scale, charge) != (
                facts.sensitivity,
                facts.scale,
                e.draft.charge,
            ):
                out.append(f"entry {e.seq}: mechanism facts differ from what its policy calibrates")
        return out

    def _verify_spend(
        self,
        charges: list[tuple[tuple[int, str], Fraction]],
        stored: dict[tuple[int, str], Fraction],
        epoch_policy: dict[int, str],
    ) -> list[str]:
        out: list[str] = []
        derived: dict[tuple[int, str], Fraction] = {}
        for key, c in charges:
            derived[key] = derived.get(key, Fraction(0)) + c
        for key in sorted(set(derived) | set(stored)):
            if derived.get(key, Fraction(0)) != stored.get(key, Fraction(0)):
                out.append(
                    f"spend of epoch {key[0]} scope {key[1]!r} is {stored.get(key)} but its "
                    f"entries sum to {derived.get(key)}"
                )
        for epoch in sorted({k[0] for k in derived}):
            policy = self._recorded_policy(epoch_policy[epoch])
            if policy is None:
                out.append(f"epoch {epoch}: its policy {epoch_policy[epoch][:12]}… is not recorded")
                continue
            spent = spent_by_scope((s, v) for (e, s), v in derived.items() if e == epoch)
            for region in regions_in_view(policy, spent) or (ALL,):
                loss = client_loss(spent, region)
                if loss > policy.eval_budget:
                    out.append(
                        f"epoch {epoch}, region {region}: loss {loss} exceeds its policy's "
                        f"{policy.eval_budget}"
                    )
        return out
