"""Review 39 (api): the frozen models (``Policy``, ``ReleaseRequest``, ``Plan``,
``ClipCalibration``, …) refused ``policy.name = "x"`` and ``del request.cohort`` with
pydantic's own ``ValidationError`` ("Instance is frozen"), though ``FrozenModel`` says
pydantic's error never escapes; now it is the model's typed error (``PolicyError`` for a
policy, else ``InvalidInput``). And a ``Policy`` could not be pickled, deep-copied or
``model_copy(deep=True)``-ed at all (``TypeError: cannot pickle 'mappingproxy'``: its
read-only metrics mapping), so it could not be sent to a worker process."""

from __future__ import annotations

import copy
import pickle

import pytest

import dpledger as dl
from tests.factories import SPATIAL


def test_setting_or_deleting_a_field_is_a_typed_error() -> None:
    policy = dl.Policy.load(SPATIAL)
    request = dl.ReleaseRequest(epoch=0, metric="m", region="a", cohort=1)
    with pytest.raises(dl.PolicyError, match="frozen"):
        policy.name = "x"  # type: ignore[misc]
    with pytest.raises(dl.PolicyError, match="frozen"):
        del policy.epoch_epsilon
    with pytest.raises(dl.InvalidInput, match="frozen"):
        request.cohort = 5  # type: ignore[misc]
    with pytest.raises(dl.InvalidInput, match="frozen"):
        policy.metrics["clipped_mean_loss"].epsilon = 1  # type: ignore[misc]
    assert policy.name == "spatial-eval"
    assert request.cohort == 1


def test_a_policy_pickles_and_deep_copies() -> None:
    policy = dl.Policy.load(SPATIAL)
    _ = policy.content_hash, policy.eval_budget  # cached values travel too
    for copied in (
        pickle.loads(pickle.dumps(policy)),
        copy.deepcopy(policy),
        policy.model_copy(deep=True),
    ):
        assert copied == policy
        assert copied.content_hash == policy.content_hash
        assert copied.eval_budget == policy.eval_budget
        with pytest.raises(TypeError):  # still read-only
            copied.metrics["x"] = policy.metrics["coverage"]  # type: ignore[index]
        with pytest.raises(dl.PolicyError, match="frozen"):
            copied.name = "x"  # type: ignore[misc]
    plan = dl.plan(policy, {"eu-west": 2400})
    assert pickle.loads(pickle.dumps(plan)) == plan
