"""Review (priv): under add_remove the docs told the caller to make the planned cohort
bound the count by truncating to it ("select or truncate to it", docs/privacy-model.md;
"a silo keeps at most its planned count of records (truncate before summing …)"; the
cross-silo notebook kept each hospital's first QUOTA records). Where truncation binds,
adding one person pushes another person's record out: the truncated sum moves by two
records while the ledger charges add_remove's one. The charge holds for any count
without truncation, so the docs now say never to truncate; this guards both facts and
the wording. Deterministic (no noise)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from dpledger import Policy
from dpledger.mechanisms import policy_sensitivity
from dpledger.metrics.records import record_confusion

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "policies" / "cross-silo.toml"
QUOTA = 3  # the planned record count of the one silo: public, fixed before the round


def _sum(y: list[int], keep: int | None = None) -> np.ndarray:
    return record_confusion(y[:keep], y[:keep], n_classes=10).total()


def test_the_charge_holds_for_any_count_and_truncation_would_double_it() -> None:
    charged = policy_sensitivity(Policy.load(POLICY), "digits_confusion")  # one record
    silo = [0, 1, 2, 3, 4]  # above its plan of QUOTA: summed whole, as the docs now say
    for at in range(len(silo) + 1):  # one more patient, at any place in the listing
        grown = [*silo[:at], 7, *silo[at:]]
        assert float(np.abs(_sum(silo) - _sum(grown)).sum()) <= charged
    # what the docs used to advise: keep the first QUOTA, then sum
    moved = float(np.abs(_sum([0, 1, 2], QUOTA) - _sum([7, 0, 1, 2], QUOTA)).sum())
    assert moved > charged  # two records changed: why the docs say never truncate


def test_no_doc_advises_truncating_to_the_planned_cohort() -> None:
    texts = {
        p: p.read_text(encoding="utf-8") for p in (ROOT / "README.md", *ROOT.glob("docs/*.md"))
    }
    notebook = json.loads((ROOT / "notebooks" / "05-cross-silo.ipynb").read_text(encoding="utf-8"))
    texts[ROOT / "05-cross-silo"] = "".join("".join(c["source"]) for c in notebook["cells"])
    for path, text in texts.items():
        flat = " ".join(text.split())
        for advice in ("select or truncate to it", "truncates to it", "truncate before summing",
                       "keeps its first `QUOTA` records"):  # fmt: skip
            assert advice not in flat, (path.name, advice)
    assert "Never truncate to the planned cohort" in texts[ROOT / "docs" / "privacy-model.md"]
