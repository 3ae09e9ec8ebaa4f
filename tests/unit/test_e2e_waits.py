"""The e2e tests' one wait (tests/e2e/waits.py): it returns on the event, with what the event
answered and how long it took, and fails at its bound with the caller's words."""

from __future__ import annotations

import itertools

import pytest

from tests.e2e import waits


def test_it_returns_the_first_true_answer_without_waiting_a_whole_interval() -> None:
    answers = iter(["", "", "200"])
    found, seconds = waits.until(lambda: next(answers), 5, "never")
    assert found == "200"
    assert seconds < 2 * waits.POLL + 0.2


def test_it_fails_at_its_bound_saying_what_it_waited_for(monkeypatch) -> None:
    monkeypatch.setattr(waits, "POLL", 0.01)
    asked = itertools.count()
    said = r"^not within 0.5 s: /health 200 \(asked \d+ times\)$"
    with pytest.raises(AssertionError, match=said):
        waits.until(
            lambda: next(asked) < 0, 0.5, lambda: f"/health 200 (asked {next(asked)} times)"
        )
