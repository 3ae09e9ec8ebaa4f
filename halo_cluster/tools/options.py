"""Every command's options, declared one way: `parser(...)` for each command's argparse parser.

argparse alone takes `--retr` for `--retry` (a prefix), lets the last of two `--firmware` win
without a word, and reads `--image ''` as no `--image`, each then going on to reach the nodes;
its errors are two lines (the usage, then the error) with exit 2, which is drift's "something
would change" and status's "down". Here an option is given at most once and never empty, no
prefix is taken, and every usage error is one line, `PROG: what is wrong`, with the command's
own exit code for an error, before the config is read or any host is contacted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from halo_cluster.config.quoting import LIMIT, quote

Rule = Callable[[str], str | None]  # what is wrong with a value, or None (config/rules.py's)
LINE_LIMIT = 200  # an argparse message still longer than this, or not one line, is quoted


def problem(option: str, value: str | None, times: int = 1, rule: Rule | None = None) -> str | None:
    """What is wrong with OPTION given TIMES times, the first with VALUE (None: it takes
    none), or None: given twice, an empty value (a script's unset variable, never read as the
    option left out), or a value its rule refuses."""
    if times > 1:
        return f"{option} given twice"
    if value == "":
        return f"{option}: empty value: give one, or leave the option out"
    wrong = rule(value) if value is not None and rule else None
    return f"{option}: {wrong}" if wrong else None


class Parser(argparse.ArgumentParser):
    """A command's parser: no prefixes, options once and non-empty (`value`, `flag`), unknown
    arguments and every error one line with exit `usage_error`."""

    def __init__(self, usage_error: int, **kwargs: Any) -> None:
        # the descriptions are the modules' docstrings, already laid out
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(allow_abbrev=False, **kwargs)
        self.usage_error = usage_error
        self.given: set[str] = set()  # the options seen in this parse
        self.typed: list[str] = []  # the arguments of this parse, as argparse may echo them

    def value(self, name: str, metavar: str, help: str, rule: Rule | None = None) -> None:
        """An option taking one value, once, non-empty, passing `rule`; None when left out."""
        self.add_argument(name, metavar=metavar, help=help, action=_Value, rule=rule)

    def flag(self, name: str, help: str, required: bool = False) -> None:
        """An option without a value, once."""
        self.add_argument(name, help=help, action=_Flag, required=required)

    def parse_args(
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        self.given = set()
        self.typed = list(sys.argv[1:] if args is None else args)
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            known = [
                o for a in self._actions for o in a.option_strings if o not in ("-h", "--help")
            ]
            options = f"its options: {', '.join(known)}" if known else "it takes no options"
            self.refuse(f"{quote(unknown[0])}: unknown argument ({options}; --help)")
        return parsed

    def refuse(self, message: str) -> NoReturn:
        """The tool's own line, whose values are already quoted: printed as it is."""
        self.exit(self.usage_error, f"{self.prog}: {message}\n")

    def error(self, message: str) -> NoReturn:
        """argparse's messages embed what was typed, raw or by repr: each value that is not a
        short printable one is quoted there, the sentence around it kept."""
        values = {part for arg in self.typed for part in (arg, arg.partition("=")[2])}
        for value in sorted(values, key=len, reverse=True):
            if value and not (value.isprintable() and len(value) <= LIMIT):
                message = message.replace(repr(value), quote(value))
                message = message.replace(value, quote(value))
        if not message.isprintable() or len(message) > LINE_LIMIT:  # a value not among typed
            message = quote(message)
        self.refuse(message)


class _Value(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, rule: Rule | None = None,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(option_strings, dest, **kwargs)
        self.rule = rule

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
        option_string: str | None = None,
    ) -> None:  # fmt: skip
        _once(parser, self, values, self.rule)
        setattr(namespace, self.dest, values)


class _Flag(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
        option_string: str | None = None,
    ) -> None:  # fmt: skip
        _once(parser, self, None, None)
        setattr(namespace, self.dest, True)


def _once(parser: Parser, action: argparse.Action, value: str | None, rule: Rule | None) -> None:
    """Refuses ACTION's second occurrence, or its VALUE, in PARSER's one line."""
    times = 2 if action.dest in parser.given else 1
    parser.given.add(action.dest)
    if wrong := problem(action.option_strings[-1], value, times, rule):
        parser.refuse(wrong)


def parser(prog: str, description: str | None, usage_error: int, **kwargs: Any) -> Parser:
    """The parser of command PROG (`halo-cluster upgrade`), whose usage errors exit with
    `usage_error`, the command's exit code for an error (docs/ci.md)."""
    return Parser(usage_error, prog=prog, description=description, **kwargs)
