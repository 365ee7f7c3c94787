"""Review 41: ledger names that look alike, and names that only resemble one another.

- (diff) The Cyrillic/Greek look-alike fold of stop 41 missed letters one step to the
  side: the capital Cyrillic WE ``Ԝ`` (its small ``ԝ`` folded), the capital palochka
  ``Ӏ``, the Greek lunate sigma ``ϲ``/``Ϲ``, the yot ``ϳ``/``Ϳ``, the izhitsa ``ѵ``/``Ѵ``,
  the straight ``ү`` and more; and a letter with a diacritic was never folded (the fold ran
  on NFC, where Cyrillic ``ё`` is one letter: ``Zoё.db`` was no twin of ``Zoë.db``). Each
  such name started a new, empty budget beside the ledger meant: the fold is TR39's, on NFD.
- (diff 2) That fold made two letters of one alphabet one (Cyrillic ``у`` and ``ү`` both
  ``y``): Kyrgyz ``кун`` (a price) and ``күн`` (a day), Mongolian ``ус`` and ``үс``, were
  refused as one name. Twins are decided per pair (``dpledger._path_text.look_alike``):
  names whose letters come from one set of scripts are two names; a letter of another
  script still makes a twin (``daү.db`` beside ``day.db``).
- (stop 41) A ledger another opener created between the twin check's existence test and
  its directory listing was listed as a twin of itself (the store contract's concurrent
  first opens, now and then).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_review40_led_unicode_twins import _release

from dpledger import _files
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


def test_a_letter_of_another_script_makes_a_twin_one_alphabet_two_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, "day.db")) == 0
    assert main(_release(tmp_path, "da\u04af.db")) == 2  # a Cyrillic ү among Latin letters
    assert main(_release(tmp_path, "\u043a\u0443\u043d.db")) == 0
    assert main(_release(tmp_path, "kyn.db")) == 0  # Latin k, y, n: not drawn as кун
    assert main(_release(tmp_path, "\u043a\u04af\u043d.db")) == 0  # Kyrgyz күн beside кун
    assert main(_release(tmp_path, "\u0443\u0441.db")) == 0  # Mongolian ус
    assert main(_release(tmp_path, "\u04af\u0441.db")) == 0  # and үс: two words
    assert not (tmp_path / "da\u04af.db").exists()


def test_a_ledger_created_meanwhile_is_not_its_own_twin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stop 41 (the store contract's 8 concurrent first opens, ~1 run in 30): a file made
    by another opener between the twin check's "does it exist" and its directory listing
    was listed as a twin of itself, and that opener was refused."""
    path = tmp_path / "ledger-2d82be8c.db"
    path.write_bytes(b"")  # made by the other opener, after the existence check said no
    monkeypatch.setattr(_files.os.path, "lexists", lambda p: False)
    _files._check_unicode_twin(str(path), "ledger path")  # no twin: its own name
