"""A section's key naming a file of its keys (a model recipe), as a role declares it: the schema
holds every role's (`Schema.expansions`), config/presets.py reads and expands them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Expansion:
    """A key whose value names a file of its section's keys (a model recipe), declared by the
    role that owns the section; the loader expands it before the schema walk
    (config/presets.py): the keys the user wrote win, and each key the file sets is checked by
    the same rules as a written one.

    `key`: the naming key; `noun`: what its messages call a file (`recipe`); `keys`: the
    section's keys a file may set, `required` those it must; `shipped`: the folder of the files
    the package ships; `folder`: the user's folder of their own, beside the config, whose file
    wins over a shipped one of the same name."""

    key: str
    noun: str
    keys: tuple[str, ...]
    required: tuple[str, ...]
    shipped: Path
    folder: str

    @property
    def section(self) -> str:
        return self.key.rpartition(".")[0]
