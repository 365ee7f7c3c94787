"""Review 40 (diff review): refusing invisible characters in ledger paths (a12a6a1)
refused every Unicode format character (category Cf) but the two joiners, and with them
ones that are seen: a subdivision flag (England's 🏴 + tag letters ``gbeng`` + cancel
tag, an emoji every platform shows as a flag) and the Arabic number sign (a prepended
concatenation mark, drawn under the digits after it). ``Ledger.open`` and the CLI said
such a path "holds a control character (or an invisible one)"; an existing ledger there
could no longer even be verified. Those stay usable; a stray tag character, a soft
hyphen or an isolate, nobody sees, so they stay refused."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import dpledger as dl
from dpledger._files import check_unpadded
from dpledger.errors import InvalidInput
from tests.factories import policy

ENGLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"


def _policy() -> dl.Policy:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        return policy()


@pytest.mark.parametrize("name", [f"{ENGLAND}.db", f"x{ENGLAND}", "\u0600\u0661\u0662.db"])
def test_format_characters_that_are_seen_are_usable(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with dl.Ledger.open(path, _policy(), mode="create") as ledger:
        assert ledger.location == str(path)
        ledger.init()
    assert path.exists()
    with dl.Ledger.open(path, _policy(), mode="read") as ledger:
        assert ledger.verify().ok


@pytest.mark.parametrize(
    "text",
    [
        "L\U000e0067.db",  # a tag without its flag
        "\U0001f3f4\U000e0067\U000e0062.db",  # tags never cancelled
        "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f\u200b.db",
        "L\u00ad.db",  # a soft hyphen
        "a\u2066b\u2069.db",  # an isolate
    ],
)
def test_invisible_format_characters_stay_refused(text: str) -> None:
    with pytest.raises(dl.InvalidInput, match="invisible"):
        check_unpadded(text)


def test_the_mongolian_vowel_separator_is_used_inside_words() -> None:
    """U+180E (a format character) sits inside Mongolian words, as the joiners do in
    Persian: refused only at either end of a name."""
    name = "\u182a\u1822\u180e\u1820.db"  # ᠪᠢ + MVS + ᠠ
    assert check_unpadded(name) == name
    with pytest.raises(InvalidInput):
        check_unpadded("L.db\u180e")
