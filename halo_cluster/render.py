"""Render the files in templates/ (one Jinja2 file per rendered file, named after its target)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"

_environment = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render(template: str, **values: Any) -> str:
    return _environment.get_template(template).render(**values)
