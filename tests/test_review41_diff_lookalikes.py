"""Review 41 diff: the look-alike fold of ledger names missed letters one step to the side.

Stop 41 (37a71ef) folds a Cyrillic or Greek letter drawn as a Latin one onto that letter
when looking for a twin of an existing ledger (``lаb.db`` with a Cyrillic ``а`` beside
``lab.db`` started a fresh budget). Its table, said to hold the letters Unicode's
confusables (TR39) give as one Latin letter, held a subset: the capital Cyrillic WE
``Ԝ`` was missing while the small ``ԝ`` was folded, so was the capital palochka ``Ӏ``
(the small ``ӏ`` folded), the Greek lunate sigma ``ϲ``/``Ϲ`` (a ``c``), the yot
``ϳ``/``Ϳ``, the izhitsa ``ѵ``/``Ѵ``, the straight ``ү`` and more. And a letter with a
diacritic was never folded: the fold ran on the NFC form, where ``ё`` (Cyrillic ``е`` with
a diaeresis) is one precomposed letter, so ``Zoё.db`` was no twin of ``Zoë.db`` (TR39's
skeleton decomposes first). Each such name started a new, empty budget beside the ledger
meant.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger._path_text import skeleton
from dpledger.cli.main import main

TWINS = [
    ("Wards.db", "\u051cards.db"),  # CYRILLIC CAPITAL LETTER WE (small ԝ was folded)
    ("Iris.db", "\u04c0ris.db"),  # CYRILLIC LETTER PALOCHKA (small ӏ was folded)
    ("cost.db", "\u03f2ost.db"),  # GREEK LUNATE SIGMA SYMBOL
    ("Cost.db", "\u03f9ost.db"),  # GREEK CAPITAL LUNATE SIGMA SYMBOL
    ("jobs.db", "\u03f3obs.db"),  # GREEK LETTER YOT
    ("Jobs.db", "\u037fobs.db"),  # GREEK CAPITAL LETTER YOT
    ("val.db", "\u0475al.db"),  # CYRILLIC SMALL LETTER IZHITSA
    ("Val.db", "\u0474al.db"),  # CYRILLIC CAPITAL LETTER IZHITSA
    ("day.db", "da\u04af.db"),  # CYRILLIC SMALL LETTER STRAIGHT U
    ("Zo\u00eb.db", "Zo\u0451.db"),  # ë, and Cyrillic ё (е with a diaeresis)
    ("na\u00efve.db", "na\u0457ve.db"),  # ï, and Ukrainian ї (і with a diaeresis)
    ("\u00e1.db", "\u03ac.db"),  # á, and Greek ά (α with tonos)
]


@pytest.mark.parametrize(("existing", "twin"), TWINS)
def test_the_skeletons_of_look_alikes_are_one(existing: str, twin: str) -> None:
    assert skeleton(twin) == skeleton(existing)


def _release(tmp_path: Path, ledger: str) -> list[str]:
    agg = tmp_path / "agg.json"
    agg.write_text("1000.0")
    return ["release", "--policy", str(SPATIAL), "--ledger", ledger, "--epoch", "0",
            "--metric", "clipped_mean_loss", "--region", "na", "--cohort", "3000",
            "--aggregate", str(agg)]  # fmt: skip


@pytest.mark.parametrize(("existing", "twin"), [TWINS[0], TWINS[9]])
def test_a_release_to_such_a_twin_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    existing: str,
    twin: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, existing)) == 0
    capsys.readouterr()
    assert main(_release(tmp_path, twin)) == 2
    assert "other Unicode characters" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([existing, "agg.json"])


@pytest.mark.parametrize(
    "name",
    ["\u043b\u0430\u0431.db",  # Cyrillic лаб: not lab
     "L\u00e9.db",  # Latin é: not L.db
     "\u0439\u043e\u0433\u0430.db"],  # йога: й is и with a breve, no Latin look-alike
)  # fmt: skip
def test_names_that_only_resemble_one_stay_usable(tmp_path: Path, name: str) -> None:
    (tmp_path / "lab.db").write_bytes(b"")
    (tmp_path / "L.db").write_bytes(b"")
    assert main(_release(tmp_path, str(tmp_path / name))) == 0
