"""Render a role's templates: `roles/NAME/templates/`, one Jinja2 file per rendered file, named
after its target, read through the package (so an installed package renders as a checkout)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jinja2


def templates(package: str) -> Callable[..., str]:
    """`render(template, **values)` over the `templates` folder of `package` (a role's
    `__name__`)."""
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )

    def render(template: str, **values: Any) -> str:
        return environment.get_template(template).render(**values)

    return render
