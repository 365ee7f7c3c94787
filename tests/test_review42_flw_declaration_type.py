"""Review 42 (flw): a declaration given as anything but a name is a typed refusal.

``LedgerEvaluation(..., metrics={"loss": ["clipped_loss"]})`` — a list where the name of
a declared contribution belongs — raised ``TypeError: unhashable type: 'list'`` from the
``DECLARATIONS`` look-up while the wrapper was built: bad input must get a typed
``DpLedgerError`` naming the problem and what to do, as a misspelt name already did.
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

from flwr.serverapp.strategy import FedAvg
from test_flower import policy

from dpledger import Ledger
from dpledger.errors import InvalidInput
from dpledger.flower import LedgerEvaluation


@pytest.mark.parametrize("declaration", [["clipped_loss"], {"clipped_loss": 1}, 5, None])
def test_a_declaration_that_is_not_a_name_is_refused_typed(declaration: object) -> None:
    refused = pytest.raises(InvalidInput, match="is not a declared contribution; choose from")
    with Ledger.open(":memory:", policy(), mode="create") as ledger, refused:
        LedgerEvaluation(FedAvg(), ledger, metrics={"loss": declaration})  # type: ignore[dict-item]
