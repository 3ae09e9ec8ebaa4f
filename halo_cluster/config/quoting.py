"""How every message of the tool shows a value it was given: `quote`, the one quoting.

A value may hold anything: ESC, which reaches the terminal; a newline, which forges a second line
of the message; a look-alike of an ASCII character (a Cyrillic a, an Arabic-Indic digit), which
reads as the one the user meant; or megabytes. `quote` escapes the first two as `repr` does,
names each non-ASCII character it shows by its code point and Unicode name, and shows at most
about 60 characters, then the value's length; in bounded time and memory whatever the value.
"""

from __future__ import annotations

import reprlib
import unicodedata

LIMIT = 60  # characters of a value a message shows: a 10 MB value is not echoed
NAMED = 3  # distinct non-ASCII characters named; more are counted
PATH_LIMIT = 200  # a file's path is shown as typed up to this length

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = LIMIT + 10
_REPR.maxlist = _REPR.maxdict = _REPR.maxtuple = _REPR.maxset = 4
_REPR.maxlevel = 2  # bounded whatever the value: an alias bomb is a tree of shared lists


def quote(value: object) -> str:
    """A string as `repr` shows it (control characters escaped: `'\\x1b[2J'`), cut to about
    LIMIT characters of text with its length after (`'aaa'... (5000 characters)`), each
    non-ASCII character named after it (`(U+0661 ARABIC-INDIC DIGIT ONE at 1)`); any other
    value by its bounded `repr`, in ASCII."""
    if not isinstance(value, str):
        text = _REPR.repr(value).encode("ascii", "backslashreplace").decode("ascii")
        return text if len(text) <= LIMIT else text[: LIMIT - 3] + "..."
    shown = value[:LIMIT]
    while len(repr(shown)) > LIMIT + 2:  # escapes take 2-10 characters each
        shown = shown[:-1]
    notes = [f"{len(value)} characters"] if len(shown) < len(value) else []
    text = repr(shown) + ("..." if notes else "")
    notes += _named(shown)
    return f"{text} ({'; '.join(notes)})" if notes else text


def path(text: str) -> str:
    """A file's path as the user typed it when it is one printable line of reasonable length,
    else quoted: the config's path leads every line of its problems."""
    return text if text.isprintable() and len(text) <= PATH_LIMIT else quote(text)


def _named(text: str) -> list[str]:
    """`U+0430 CYRILLIC SMALL LETTER A at 3`, each distinct non-ASCII character of `text` at
    its first position, at most NAMED of them, then how many more."""
    first: dict[str, int] = {}
    for at, character in enumerate(text, 1):
        if not character.isascii():
            first.setdefault(character, at)
    named = [
        " ".join(filter(None, (f"U+{ord(c):04X}", unicodedata.name(c, ""), f"at {at}")))
        for c, at in list(first.items())[:NAMED]
    ]
    more = len(first) - NAMED
    return [", ".join(named) + (f", and {more} more" if more > 0 else "")] if named else []
