"""Render a role's templates: `templates/NAME/` at the top of the checkout, one Jinja2 file per
rendered file, named after its target. They are read as the package `halo_cluster.templates`
(setup.py maps the folder), so a checkout and an installed wheel render the same files.

A value reaches a rendered file through the filter of its reader, whatever the value (the
config's rules refuse hostile values earlier; these hold for a value from a node too):

- `sh`: a word of a file a shell reads (the launcher's cluster.env, which profile.d sources,
  every `*.sh`): `shlex.quote`, a list as one quoted word per item;
- `oneline`: a value of a file read line by line without quoting (podman's `--env-file`, which
  quadlet's `EnvironmentFile=` is: everything after the first `=` taken literally, so shell
  quotes would become part of the value) and of a `#` comment: refused when it holds a line break;
- `integer`: a number written as code (a shell test, a Python line): refused unless an integer.

tests/unit/test_shell_files.py fails on a shell-read template that writes a value otherwise.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

import jinja2

PACKAGE = "halo_cluster.templates"
LINE_BREAKS = ("\n", "\r", "\0")


def sh(value: Any) -> str:
    """One shell word, or one per item of a list or tuple."""
    if isinstance(value, list | tuple):
        return " ".join(shlex.quote(str(item)) for item in value)
    return shlex.quote(str(value))


def oneline(value: Any) -> str:
    text = str(value)
    if any(mark in text for mark in LINE_BREAKS):
        raise ValueError(f"{text!r} holds a line break: it cannot be one line of the file")
    return text


def integer(value: Any) -> str:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer")
    return str(value)


FILTERS: dict[str, Callable[[Any], str]] = {"sh": sh, "oneline": oneline, "integer": integer}


def environment(loader: jinja2.BaseLoader) -> jinja2.Environment:
    """The Jinja2 environment every template is rendered in: the filters above, and an unset
    value an error."""
    found = jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    found.filters.update(FILTERS)
    return found


def templates(role: str) -> Callable[..., str]:
    """`render(template, **values)` over the role's folder of templates, `templates/NAME/` for
    the role `halo_cluster.roles.NAME` (its `__name__`)."""
    rendering = environment(jinja2.PackageLoader(PACKAGE, folder(role)))

    def render(template: str, **values: Any) -> str:
        return rendering.get_template(template).render(**values)

    return render


def folder(role: str) -> str:
    """The role's folder of templates: its name, the last part of its module's."""
    return role.rpartition(".")[2]
