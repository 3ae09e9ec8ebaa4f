"""The one quoting of a value in every message (halo_cluster/config/quoting.py): whatever the
value, one printable line of bounded length; plain text as `repr` shows it; look-alikes named."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from halo_cluster.config.quoting import LIMIT, NAMED, path, quote

NAME_MAX = max(len(unicodedata.name(chr(i), "")) for i in range(0x110000))  # 88 in Unicode 15
# the shown text and its cut, the length, and NAMED names with code point and position
BOUND = LIMIT + 5 + len(" (1000000 characters; ") + NAMED * (len("U+10FFFF  at 60, ") + NAME_MAX)
BOUND += len(", and 1000 more)")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200) | st.text(min_size=LIMIT, max_size=5000))
def test_any_text_is_one_printable_line_of_bounded_length(text: str) -> None:
    shown = quote(text)
    assert shown.isprintable() and len(shown) <= BOUND, shown
    assert (f"... ({len(text)} characters" in shown) == (len(repr(text)) > LIMIT + 2), shown


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=LIMIT))
def test_plain_ascii_passes_as_repr_shows_it(text: str) -> None:
    assert quote(text) == repr(text)
    assert path(text) == text


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("plain", "'plain'"),
        ("\x1b[2J", "'\\x1b[2J'"),
        ("a\nfix: b", "'a\\nfix: b'"),
        ("\u0661", "'\u0661' (U+0661 ARABIC-INDIC DIGIT ONE at 1)"),
        ("Qw\u0435n", "'Qw\u0435n' (U+0435 CYRILLIC SMALL LETTER IE at 3)"),
        ("e\u202ex", "'e\\u202ex' (U+202E RIGHT-TO-LEFT OVERRIDE at 2)"),
        ("x" * 5000, "'" + "x" * LIMIT + "'... (5000 characters)"),
        ("\x1b" * 100, "'" + "\\x1b" * 15 + "'... (100 characters)"),
        (
            "\u0430\u0431\u0432\u0433\u0430",
            "'\u0430\u0431\u0432\u0433\u0430' (U+0430 CYRILLIC SMALL LETTER A at 1, "
            "U+0431 CYRILLIC SMALL LETTER BE at 2, U+0432 CYRILLIC SMALL LETTER VE at 3, "
            "and 1 more)",
        ),
        (12, "12"),
        (None, "None"),
        (["a\x1b", "\u0661"], "['a\\x1b', '\\u0661']"),
    ],
)
def test_each_kind_of_value_is_shown_so(value: object, shown: str) -> None:
    assert quote(value) == shown


def test_a_deep_or_huge_structure_is_cut() -> None:
    nested: list = []
    for _ in range(1000):
        nested = [nested, "x" * 1000]
    assert len(quote(nested)) <= LIMIT and quote(nested).isascii()


def test_a_path_is_shown_as_typed_unless_it_cannot_be() -> None:
    assert path("/home/me/Dokumente/cl\u00fcster.yml") == "/home/me/Dokumente/cl\u00fcster.yml"
    assert path("a\x1bb") == "'a\\x1bb'"
    assert path("/" + "d" * 300).endswith("... (301 characters)")
