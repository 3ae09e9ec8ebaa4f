"""pyinfra without colours, run as `python -m halo_cluster.tools.nocolor` in place of `python -m
pyinfra` when NO_COLOR is set (https://no-color.org; project.PYINFRA).

pyinfra 3.10 has no option for it: its colours are click.style's escape codes, which click.echo
strips only where `click.utils.should_strip_ansi` says so (a stream that is no terminal); here it
always says so. Its own imports are pyinfra's: this file adds none to the deploy's start-up.
"""

from __future__ import annotations

from typing import IO, Any


def strip(stream: IO[Any] | None = None, color: bool | None = None) -> bool:
    return True


def main() -> None:
    import click.utils

    click.utils.should_strip_ansi = strip
    from pyinfra_cli.main import main as pyinfra

    pyinfra()


if __name__ == "__main__":
    main()
