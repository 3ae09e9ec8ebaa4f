"""pyinfra without colours, run as `python -m halo_cluster.tools.nocolor` in place of `python -m
pyinfra` when NO_COLOR is set (https://no-color.org; project.PYINFRA).

pyinfra 3.10 has no option for it: its colours are click.style's escape codes, which click.echo
strips only where `click.utils.should_strip_ansi` says so (a stream that is no terminal); here it
always says so. pyinfra's command itself comes from node/pyinfra_internals.py, like every other
use of pyinfra's internals.
"""

from __future__ import annotations

from typing import IO, Any


def strip(stream: IO[Any] | None = None, color: bool | None = None) -> bool:
    return True


def main() -> None:
    import click.utils

    click.utils.should_strip_ansi = strip
    from halo_cluster.node.pyinfra_internals import cli_main

    cli_main()()


if __name__ == "__main__":
    main()
