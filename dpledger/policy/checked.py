"""A policy validated again from its fields: the copy a ledger enforces and a planner plans
with.

A ``Policy`` object need not have been validated: pydantic's ``model_construct`` skips every
check, and ``object.__setattr__`` changes a field under the cached budgets and hash derived
from it (review 40: an ``eval_fraction`` of 1000 was enforced and recorded). About a
millisecond a call.
"""

from __future__ import annotations

from dpledger.errors import InvalidInput, PolicyError
from dpledger.policy.base import RECORDED
from dpledger.policy.model import Policy

__all__ = ["validated_copy"]


def validated_copy(policy: object, *, recorded: bool = False, by: str = "a ledger") -> Policy:
    """``policy`` validated again from its fields, as a plain :class:`Policy`.

    ``recorded``: by the relaxed rules a policy read back from a ledger is checked with
    (:data:`RECORDED`), so one an earlier dpledger recorded still opens its ledger to
    audit. ``by`` names who validates, for the error.
    """
    if not isinstance(policy, Policy):
        raise InvalidInput(f"policy must be a dpledger Policy, got {type(policy).__name__}")
    fields = {k: v for k, v in vars(policy).items() if k in Policy.model_fields}
    token = RECORDED.set(recorded)
    try:
        return Policy.model_validate(fields)
    except PolicyError as e:
        raise PolicyError(
            f"{e.problem} ({by} validates its policy again, as loading does: this one was "
            "built without validation (model_construct), changed after it, or read back "
            "from a ledger under rules since tightened; build it with Policy.load, "
            "from_toml or model_validate)",
            source=str(fields.get("source", "<policy>")),
            field=e.field,
        ) from None
    finally:
        RECORDED.reset(token)
