"""Files of a section's keys, named by one key of it (a recipe: an `Expansion` a role
declares): found, read, checked and expanded into the document before the schema walk.

A file is the user's `FOLDER/NAME.yml` beside the config, else the package's shipped one of that
name. It is read as cluster.yml is (`yamlread.py`: bounded, a key given twice refused), and its
section's keys are walked by the same `Checker` as cluster.yml's, so that a key a file sets passes
every rule and refusal a key the user writes does (an owned vLLM flag among the arguments), each
problem naming the file. The keys the user wrote win: a file's key fills only a key the user left
out (or wrote as null). The expanded document is walked again as a whole, as the user's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from halo_cluster.config import quoting
from halo_cluster.config.expansion import Expansion
from halo_cluster.config.model import ConfigError, Problems
from halo_cluster.config.quoting import quote
from halo_cluster.config.schema import current
from halo_cluster.config.schemacheck import Checker, key_text
from halo_cluster.config.yamlread import parse_yaml, read_config

NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")  # a file name, never a path: no `/`, no `..`
SUFFIX = ".yml"
# `main`, the hub's branch, or a commit: 40 hex digits, as the hub's refs name a snapshot
REVISION = re.compile(r"main|[0-9a-f]{40}")
# a file's own keys beside its section's mapping
ABOUT = ("summary", "revision", "sources")


@dataclass(frozen=True)
class Preset:
    """One file: its name, where it is, whether the package ships it, what it says of itself and
    the section's keys it sets (checked)."""

    name: str
    path: Path
    shipped: bool
    summary: str
    revision: str
    sources: dict[str, str]
    keys: dict[str, Any]


def name_rule(value: object) -> str | None:
    """The rule of the naming key's value: a file's name, never a path."""
    if isinstance(value, str) and NAME.fullmatch(value):
        return None
    return f"{quote(value)} is not a name: lower-case letters, digits, '.', '_', '-', at most 64"


def user_folder(expansion: Expansion, base_dir: Path) -> Path:
    return base_dir / expansion.folder


def find(expansion: Expansion, name: str, base_dir: Path) -> Path | None:
    """NAME's file: the user's beside the config, else the shipped one, else None."""
    for folder in (user_folder(expansion, base_dir), expansion.shipped):
        path = folder / f"{name}{SUFFIX}"
        if path.is_file():
            return path
    return None


def names(expansion: Expansion, base_dir: Path) -> list[str]:
    """Every name a file has, the user's and the shipped, sorted."""
    found = set()
    for folder in (user_folder(expansion, base_dir), expansion.shipped):
        if folder.is_dir():
            found |= {p.stem for p in folder.glob(f"*{SUFFIX}") if NAME.fullmatch(p.stem)}
    return sorted(found)


def available(expansion: Expansion, base_dir: Path) -> list[Preset]:
    """Every file read, by name (the user's in place of a shipped one); ConfigError with every
    problem of every file."""
    lines: list[str] = []
    presets = []
    for name in names(expansion, base_dir):
        path = find(expansion, name, base_dir)
        assert path is not None  # names() listed it
        problems = Problems(quoting.path(str(path)))
        preset = read(expansion, path, problems)
        lines += problems.lines
        if preset:
            presets.append(preset)
    if lines:
        raise ConfigError(lines)
    return presets


def read(expansion: Expansion, path: Path, problems: Problems) -> Preset | None:
    """The file at `path` checked, every problem in `problems` (labelled with the file)."""
    try:
        raw, written = parse_yaml(read_config(path, problems.label), problems.label)
    except ConfigError as exc:
        problems.lines.extend(exc.problems)
        return None
    section = expansion.section
    if not isinstance(raw, dict):
        problems.error("", f"expected a mapping with {section}: and {', '.join(ABOUT)}")
        return None
    for key in raw:
        if key not in (section, *ABOUT):
            known = ", ".join((section, *ABOUT))
            problems.error(key_text(key), f"unknown key (known keys: {known})")
    keys = raw.get(section)
    if not isinstance(keys, dict):
        problems.error(section, f"expected the mapping of the {expansion.noun}'s {section} keys")
        return None
    declared = current().children_of(section)  # another key is the walk's unknown key
    for key in keys:
        if key in declared and key not in expansion.keys:
            sets = ", ".join(expansion.keys)
            problems.error(f"{section}.{key}", f"not a key a {expansion.noun} sets ({sets})")
    for key in expansion.required:
        if keys.get(key) is None:
            problems.error(f"{section}.{key}", f"required in a {expansion.noun}")
    Checker(problems, written).walk(keys, section, section)
    revision = raw.get("revision", "main")
    if not isinstance(revision, str) or not REVISION.fullmatch(revision):
        problems.error("revision", f"{quote(revision)} is neither main nor a 40-digit commit")
    sources = raw.get("sources", {})
    if not isinstance(sources, dict) or not all(isinstance(v, str) for v in sources.values()):
        problems.error("sources", "expected a mapping of what the file sets to its source")
        sources = {}
    items = {i for v in keys.values() if isinstance(v, list) for i in v if isinstance(i, str)}
    for named in sources:
        if named not in keys and named not in items:
            problems.error(f"sources.{key_text(named)}", f"names nothing the {expansion.noun} sets")
    summary = raw.get("summary", "")
    if not isinstance(summary, str):
        problems.error("summary", f"expected one line of text, got {quote(summary)}")
    if problems.lines:
        return None
    name, shipped = path.stem, path.parent == expansion.shipped
    return Preset(name, path, shipped, summary, revision, dict(sources), dict(keys))


def expand(doc: dict, problems: Problems, base_dir: Path) -> None:
    """Every naming key of the document expanded to its file's keys where the user wrote none;
    a problem of a file is one line naming that file, an unknown name one naming the key."""
    for expansion in current().expansions:
        section_name, _, key = expansion.key.rpartition(".")
        section = doc.get(section_name)
        if not isinstance(section, dict) or section.get(key) is None:
            continue
        name = section[key]
        if name_rule(name):
            continue  # the walk names it, by the key's own rule
        path = find(expansion, name, base_dir)
        if path is None:
            known = ", ".join(names(expansion, base_dir)) or "none"
            folder = f"{expansion.folder}/{name}{SUFFIX}"
            problems.error(
                expansion.key,
                f"{quote(name)} is not a {expansion.noun} (known: {known}; yours would be "
                f"{folder} beside the config)",
                fatal=True,
            )
            continue
        found = Problems(quoting.path(str(path)))
        preset = read(expansion, path, found)
        problems.lines.extend(found.lines)
        problems.fatal = problems.fatal or bool(found.lines)
        if preset is None:
            continue
        for name_of, value in preset.keys.items():
            if section.get(name_of) is None:
                section[name_of] = value
        if preset.revision != "main":  # no key pins the hub's revision: it would mislead
            problems.warn(
                expansion.key,
                f"{name} names revision {preset.revision}: the deploy fetches the hub's main",
            )
