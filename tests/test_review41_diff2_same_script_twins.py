"""Review 41 diff 2: the TR39-derived fold makes two letters of one alphabet one letter,
so a ledger named with a real word is refused beside another real word.

3a7add8 grew the look-alike table from Unicode's confusables: Cyrillic ``у`` and the
straight ``ү`` both fold to ``y`` (``У`` and ``Ү`` to ``Y``), Greek ``ο`` and ``σ`` to
``o``, Cyrillic ``е`` and Abkhaz ``ҽ`` to ``e``, ``ѡ`` and ``ԝ`` to ``w``. Before it, no two
letters of one script shared a fold. ``у``/``ү`` are distinct letters of Kazakh, Kyrgyz,
Mongolian, Tatar, Bashkir (Kyrgyz ``кун``, a price, and ``күн``, a day; Mongolian ``ус``,
water, and ``үс``, hair): with ``кун.db`` in a directory, a release to ``күн.db`` is
refused as "the same name written with other Unicode characters" — it is not, and the
only way on is to rename a ledger. A fold is an equivalence (``у`` ~ ``y`` ~ ``ү``), so
one skeleton per name cannot keep these apart while folding both onto Latin ``y``: a
twin would have to be decided per pair (the names differ only in letters of one script:
no twin), in ``dpledger/_files.py``'s twin check, or ``ү`` not folded (review 41 diff's
``daү.db`` case). Decided per pair (stop 41): names whose letters come from one set of
scripts are two names, whatever the fold says of two of their letters
(:func:`dpledger._path_text.look_alike`); ``daү.db`` beside ``day.db`` is still a twin.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger.cli.main import main


def _release(tmp_path: Path, ledger: str) -> list[str]:
    agg = tmp_path / "agg.json"
    agg.write_text("1000.0")
    return ["release", "--policy", str(SPATIAL), "--ledger", ledger, "--epoch", "0",
            "--metric", "clipped_mean_loss", "--region", "na", "--cohort", "3000",
            "--aggregate", str(agg)]  # fmt: skip


@pytest.mark.parametrize(
    ("existing", "other"),
    [("\u043a\u0443\u043d.db", "\u043a\u04af\u043d.db"),  # Kyrgyz кун / күн
     ("\u0443\u0441.db", "\u04af\u0441.db")],  # Mongolian ус / үс
)  # fmt: skip
def test_two_words_of_one_alphabet_are_two_ledgers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: str, other: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, existing)) == 0
    assert main(_release(tmp_path, other)) == 0
    assert (tmp_path / other).exists()


def test_a_letter_of_another_script_still_makes_a_twin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, "day.db")) == 0
    assert main(_release(tmp_path, "da\u04af.db")) == 2  # a Cyrillic ү among Latin letters
    assert main(_release(tmp_path, "\u043a\u0443\u043d.db")) == 0
    assert main(_release(tmp_path, "kyn.db")) == 0  # Latin k, y, n: not drawn as кун
    assert not (tmp_path / "da\u04af.db").exists()


def test_a_ledger_created_meanwhile_is_not_its_own_twin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stop 41 (the store contract's 8 concurrent first opens, ~1 run in 30): a file made
    by another opener between the twin check's "does it exist" and its directory listing
    was listed as a twin of itself, and that opener was refused."""
    from dpledger import _files

    path = tmp_path / "ledger-2d82be8c.db"
    path.write_bytes(b"")  # made by the other opener, after the existence check said no
    monkeypatch.setattr(_files.os.path, "lexists", lambda p: False)
    _files._check_unicode_twin(str(path), "ledger path")  # no twin: its own name
