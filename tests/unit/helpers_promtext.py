"""A strict parser of Prometheus' text exposition format (version 0.0.4) for the stand-in's
/metrics: anything off the format fails the test that reads it."""

from __future__ import annotations

import math
import re

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(rf"^({NAME})(?:\{{(.*)\}})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')
SUFFIXES = {"histogram": ("_bucket", "_count", "_sum"), "gauge": ("",), "counter": ("",)}


def parse_labels(text: str) -> dict[str, str]:
    labels, at = {}, 0
    while at < len(text):
        match = LABEL.match(text, at)
        assert match, f"not a label at {text[at:]!r}"
        assert match[1] not in labels, f"label {match[1]} twice"
        labels[match[1]] = match[2]
        at = match.end()
    return labels


def parse(text: str) -> dict[str, dict]:
    """Families by name: type, help and samples (name, labels, value); anything off fails."""
    assert text.endswith("\n")
    families: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[len("# HELP ") :].partition(" ")
            assert name not in families, f"{name} twice"
            current = families[name] = {"help": help_text, "type": None, "samples": []}
        elif line.startswith("# TYPE "):
            name, _, kind = line[len("# TYPE ") :].partition(" ")
            assert current is families.get(name) and current["type"] is None, line
            assert kind in SUFFIXES, line
            current["type"] = kind
        else:
            match = SAMPLE.match(line)
            assert match and current and current["type"], f"not a sample in order: {line!r}"
            family = next(n for n, f in families.items() if f is current)
            assert match[1] in {family + s for s in SUFFIXES[current["type"]]}, line
            value = float(match[3])
            assert not math.isnan(value), line
            current["samples"].append((match[1], parse_labels(match[2] or ""), value))
    return families


def value(families: dict, name: str, **labels: str) -> float:
    (found,) = [v for n, got, v in families[name]["samples"] if labels.items() <= got.items()]
    return found
