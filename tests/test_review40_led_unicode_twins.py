"""Ledger paths that look alike but name another file started a fresh budget (review 40).

Review 39 refused a padded path (``L.db `` beside ``L.db``). More invisible differences
got through, each making ``release`` create a second ledger and release the epoch's metric
again with new noise, saying only "created a new ledger at …":

- the same name in another Unicode normal form (``Lé.db`` composed, NFC, and decomposed,
  NFD, as macOS writes names: two files on Linux);
- an invisible character (a zero-width space ``L.db\\u200b``, a C1 control, a
  bidirectional override): refused in any path;
- unseen characters of other categories (a variation selector ``L.db\\ufe0f``, a combining
  grapheme joiner, a Hangul filler; diff review), a joiner inside the name (``L\\u200d.db``,
  ``./\\u200cL.db``, the Mongolian vowel separator; diff 3), a no-break or thin space for
  a space, a hyphen look-alike for ``-`` (diff 3): the same name to a reader;
- the plain ASCII twin of such a name (``L.db`` beside ``L.db\\ufe0f``, ``K.db`` beside the
  KELVIN SIGN's): the twin check had an ASCII fast path (diff 3);
- a Cyrillic or Greek letter drawn as a Latin one (``lаb.db`` with a Cyrillic ``а``;
  stop 41: left open by review 40).

A new path that looks like an existing file is refused before anything is created (exit
2); a name where such a character is meant, with no twin beside it, stays usable.
"""

from __future__ import annotations

import unicodedata
import warnings
from pathlib import Path

import pytest
from factories import SPATIAL, policy

import dpledger as dl
from dpledger.cli.main import main


def _release(tmp_path: Path, ledger: str) -> list[str]:
    agg = tmp_path / "agg.json"
    agg.write_text("1000.0")
    return ["release", "--policy", str(SPATIAL), "--ledger", ledger, "--epoch", "0",
            "--metric", "clipped_mean_loss", "--region", "na", "--cohort", "3000",
            "--aggregate", str(agg)]  # fmt: skip


@pytest.mark.parametrize(("first", "then"), [("NFC", "NFD"), ("NFD", "NFC")])
def test_the_same_name_in_another_unicode_form_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    first: str,
    then: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    name = "Lé.db"
    assert main(_release(tmp_path, unicodedata.normalize(first, name))) == 0
    capsys.readouterr()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(_release(tmp_path, unicodedata.normalize(then, name))) == 2
    assert "other Unicode characters" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    policy = dl.Policy.load(str(SPATIAL))
    with pytest.raises(dl.InvalidInput, match="other Unicode characters"):
        dl.Ledger.open(unicodedata.normalize(then, name), policy, mode="create")


@pytest.mark.parametrize("invisible", ["\u200b", "\ufeff", "\u202e", "\x85", "\u2028"])
def test_an_invisible_character_in_a_ledger_path_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    invisible: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, "L.db")) == 0
    capsys.readouterr()
    for padded in ("L.db" + invisible, invisible + "L.db", "L" + invisible + ".db"):
        assert main(_release(tmp_path, padded)) == 2
        assert "invisible" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L.db", "agg.json"]


TWINS = [
    # unseen characters of other categories than Cf (diff review)
    ("L.db", "L.db\ufe0f"), ("L.db", "L\u034f.db"), ("L.db", "L\u3164.db"),
    ("L.db", "L.db\U000e0100"),
    # a joiner inside the name, not at the ends of the path text (diff 3)
    ("L.db", "L\u200d.db"), ("L.db", "./\u200cL.db"), ("L.db", "L\u180e.db"),
    # a no-break, narrow no-break or thin space for a space, and back (diff 3)
    ("my ledger.db", "my\u00a0ledger.db"), ("my ledger.db", "my\u202fledger.db"),
    ("my ledger.db", "my\u2009ledger.db"), ("my\u00a0ledger.db", "my ledger.db"),
    # HYPHEN and NON-BREAKING HYPHEN for "-" (diff 3)
    ("my-ledger.db", "my\u2010ledger.db"), ("my-ledger.db", "my\u2011ledger.db"),
    # the plain ASCII twin of an existing look-alike (diff 3)
    ("L.db\ufe0f", "L.db"), ("\u212a.db", "K.db"),
    # a Cyrillic or Greek letter drawn as the Latin one, both ways (stop 41)
    ("lab.db", "l\u0430b.db"), ("l\u0430b.db", "lab.db"), ("ops.db", "\u03bfps.db"),
    ("PROD.db", "\u0420R\u041eD.db"), ("my-eval.db", "my-\u0435v\u0430l.db"),
    # a capital the first table missed, and a letter with a mark (review 41 diff)
    ("Wards.db", "\u051cards.db"), ("Zo\u00eb.db", "Zo\u0451.db"),
]  # fmt: skip


@pytest.mark.parametrize(("existing", "twin"), TWINS)
def test_a_look_alike_twin_of_an_existing_ledger_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    existing: str,
    twin: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, existing)) == 0  # no twin beside it yet: usable
    capsys.readouterr()
    assert main(_release(tmp_path, twin)) == 2
    assert "other Unicode characters" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([existing, "agg.json"])


@pytest.mark.parametrize(
    "name",
    ["می\u200cخواهم.db",  # Persian, a ZWNJ inside a word
     "\U0001f468\u200d\U0001f469\u200d\U0001f467.db",  # an emoji family (ZWJ sequence)
     "\u0915\u094d\u200d\u0937.db"],  # Devanagari half form
)  # fmt: skip
def test_a_name_with_a_joiner_and_no_twin_stays_usable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "other.db").write_bytes(b"")
    assert main(_release(tmp_path, name)) == 0
    assert (tmp_path / name).exists()


def test_names_that_only_resemble_one_are_other_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_release(tmp_path, "my-ledger.db")) == 0
    assert main(_release(tmp_path, "my\u2013ledger.db")) == 0  # an en dash, drawn longer
    (tmp_path / "Lé.db").write_bytes(b"")  # another name, not a twin of L.db
    assert main(_release(tmp_path, "\u043b\u0430\u0431.db")) == 0  # Cyrillic лаб: not lab
    assert main(_release(tmp_path, "L.db")) == 0
    assert (tmp_path / "L.db").exists()


def test_a_meant_variation_selector_stays_usable(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        p = policy()
    path = tmp_path / "\u2764\ufe0f.db"  # a red heart, emoji presentation
    with dl.Ledger.open(path, p, mode="create") as ledger:
        ledger.init()
    assert path.exists()
