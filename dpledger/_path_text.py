"""What the text of a path may be: UTF-8 without NUL, no padding, no unseen characters.

A path that differs from the one meant only in what a reader cannot tell apart (a
trailing space or ``\r``, a zero-width space, a bidirectional override, NFC against NFD,
a Cyrillic ``а`` for ``a``) names another file: a release there would start a new, empty
budget beside the ledger meant (reviews 39, 40).
:func:`skeleton` is how a name looks, for finding such twins beside an existing file.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from dpledger.errors import InvalidInput

__all__ = ["check_path_text", "check_unpadded", "look_alike", "skeleton"]


def check_path_text(path: str | Path, what: str = "ledger path") -> str:
    """``path`` as text a database can take: no NUL byte, valid UTF-8; else InvalidInput.

    A name given as bytes that are not UTF-8 reaches Python as lone surrogates, which
    SQLite cannot encode: refused here, before anything is created.
    """
    text = str(path)
    shown = "URL" if "://" in text else repr(text)  # a URL may hold a password: not shown
    if "\x00" in text:
        raise InvalidInput(f"the {what} {shown} contains a NUL byte: name a real file")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            f"the {what} {shown} is not valid UTF-8: rename the file or directory to a "
            "UTF-8 name (a ledger path is stored and opened as UTF-8 text)"
        ) from None
    return text


def check_unpadded(text: str, what: str = "ledger path") -> str:
    """``text`` unless it begins or ends with whitespace or holds a control character
    (InvalidInput): ``L.db `` or ``L.db\r`` (a line of an ``.env`` file) names another
    file than ``L.db``, and a release there would start a new, empty budget beside the
    ledger meant."""
    seen = _FLAG_TAGS.sub("\U0001f3f4", text)  # a flag's tags are seen as the flag
    ends = _invisible(seen[:1], True) or _invisible(seen[-1:], True)
    if text != text.strip() or ends or any(_invisible(c) for c in seen):
        shown = "URL" if "://" in text else repr(text)  # a URL may hold a password: not shown
        raise InvalidInput(
            f"the {what} {shown} begins or ends with whitespace or holds a control character "
            "(or an invisible one): a release there would start a new, empty budget beside "
            "the ledger meant; remove them (from $DPLEDGER_URL too), or rename such a file"
        )
    return text


def _invisible(c: str, end: bool = False) -> bool:
    """Whether ``c`` is a character nobody sees in a path: a control (C0 or C1), a line
    or paragraph separator, or a format character (a zero-width space, a byte-order mark,
    a bidirectional override; review 40: ``L.db\\u200b`` was a new ledger beside ``L.db``);
    the two joiners and the Mongolian vowel separator (used inside words) only at an end
    (``end``); never one that is seen (the Arabic number sign; a flag's tags are read as
    the flag, review 40 diff)."""
    if not c or c in _SEEN_FORMAT:
        return False
    kind = unicodedata.category(c)
    inside = "\u200c\u200d\u180e"  # the joiners, the Mongolian vowel separator: in words
    return kind in ("Cc", "Zl", "Zp") or (kind == "Cf" and (end or c not in inside))


_SEEN_FORMAT = frozenset("\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2"
                         "\U000110bd\U000110cd")  # fmt: skip
_FLAG_TAGS = re.compile("\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{3,6}\U000e007f")

_IGNORED = re.compile(  # Unicode's default-ignorable characters the path check lets through:
    # not Cf, or the joiners and the Mongolian vowel separator inside a text (L\u200d.db)
    "[\u200c\u200d\u180e\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u3164\ufe00-\ufe0f\uffa0"
    "\U000e0100-\U000e01ef]"
)


_SPACES = re.compile("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")  # Zs but U+1680 (seen)
"""Spaces that look like U+0020 (a no-break space pasted from a web page or a chat, the
narrow no-break space macOS writes in file names): ``my\\u00a0ledger.db`` is ``my ledger.db``
to a reader (review 40 diff 3)."""


def skeleton(name: str) -> str:
    """``name`` as it looks: NFC, without the unseen characters the path check lets through
    (variation selectors, a combining grapheme joiner, fillers, the joiners), every space as
    U+0020, every hyphen as ``-``, every Cyrillic or Greek letter drawn as a Latin one as
    that letter: two names with one skeleton are twins to a reader. Folded decomposed (NFD,
    as TR39's skeleton is), then composed: a letter with a mark is its base letter's look-
    alike with that mark (Cyrillic ``ё`` is ``ë``, Greek ``ά`` is ``á``)."""
    return _folded(name, _DRAWN_AS)


def look_alike(name: str, other: str) -> bool:
    """Whether two names of one :func:`skeleton` are twins to a reader: they differ only in
    what nobody sees (the Unicode form, unseen characters, spaces, hyphens), or their
    letters come from other scripts (``lаb`` with a Cyrillic ``а``). Two words of one
    alphabet are two names even where the fold makes two of its letters one (Kyrgyz
    ``кун`` and ``күн``: ``у`` and ``ү`` both fold to ``y``; review 41 diff 2)."""
    if name == other or skeleton(name) != skeleton(other):  # itself: made meanwhile
        return False
    return _folded(name, _HYPHENS) == _folded(other, _HYPHENS) or _scripts(name) != _scripts(other)


def _folded(name: str, table: dict[int, str]) -> str:
    seen = _SPACES.sub(" ", _IGNORED.sub("", unicodedata.normalize("NFD", name)))
    return unicodedata.normalize("NFC", seen.translate(table))


def _scripts(name: str) -> frozenset[str]:
    """The scripts of ``name``'s letters, by their Unicode names' first word (LATIN,
    CYRILLIC, GREEK, …)."""
    return frozenset(unicodedata.name(c, "?").split(" ", 1)[0] for c in name if c.isalpha())


_HYPHENS = {0x2010: "-", 0x2011: "-"}  # HYPHEN, NON-BREAKING HYPHEN: drawn as "-" is
# (a word processor's or a wiki's copy of my-ledger.db), unlike the longer dashes

_LATIN_LOOKALIKES = {  # letters Unicode's confusables (TR39) give as one Latin letter
    "a": "\u0430\u03b1", "b": "\u042c", "c": "\u0441\u03f2", "d": "\u0501",
    "e": "\u0435\u04bd", "h": "\u04bb", "i": "\u0456\u03b9\u037a\ua647", "j": "\u0458\u03f3",
    "l": "\u04cf", "o": "\u043e\u03bf\u03c3", "p": "\u0440\u03c1\u03f1", "q": "\u051b",
    "r": "\u0433\u1d26", "s": "\u0455", "u": "\u03c5", "v": "\u03bd\u0475",
    "w": "\u051d\u0461", "x": "\u0445", "y": "\u0443\u03b3\u04af",
    "A": "\u0410\u0391", "B": "\u0412\u0392", "C": "\u0421\u03f9", "E": "\u0415\u0395",
    "F": "\u03dc", "G": "\u050c", "H": "\u041d\u0397", "I": "\u0406\u0399\u04c0",
    "J": "\u0408\u037f", "K": "\u041a\u039a", "M": "\u041c\u039c\u03fa", "N": "\u039d",
    "O": "\u041e\u039f", "P": "\u0420\u03a1", "S": "\u0405", "T": "\u0422\u03a4",
    "V": "\u0474", "W": "\u051c", "X": "\u0425\u03a7", "Y": "\u04ae\u03a5\u0423\u03d2",
    "Z": "\u0396",
}  # fmt: skip
"""Cyrillic and Greek letters drawn as the Latin letter they map to (``lаb.db`` with a
Cyrillic ``а`` is ``lab.db`` to a reader): a name typed on another keyboard layout, or
pasted, would start a new budget beside the ledger meant."""

_DRAWN_AS = {
    **_HYPHENS,
    **{ord(c): latin for latin, alike in _LATIN_LOOKALIKES.items() for c in alike},
}
