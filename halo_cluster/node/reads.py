"""Everything the deploy reads from a node, in one SSH command per node and run.

Each read is a pyinfra fact with its arguments, `(Fact, {kwarg: value})`: the deploy declares
its own, each role declares its in `reads(data)` next to `paths(data)`, and `prefetch` runs all
their commands in one script of the tools' one batched format (node/batch.py: each in its own
subshell and all at once, the slowest sets the time, each read back with its exit status),
through pyinfra's own connection: the values seed pyinfra's per-run fact cache, so the read is a
pyinfra fact (`NodeReads`), not the tools' transport. Every part is then
processed as pyinfra would have (`process`, or `default()` for no output or a missing
`requires_command`) and seeds the per-run cache, so the roles' `cached(host, Fact, ...)` read
the node's state from this one command. A read nobody declared is left to `cached()`: it reads
it with `host.get_fact`. A part that failed is read once more on its own; failed again, it is the
node's refusal (`unreadable`: the deploy refuses
the node with it before anything is planned), never a pyinfra error that ends the run for every
node; a fact may say what to do when its command fails on a node (`unreadable_fix`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any

import gevent.event
from pyinfra.api import FactBase, StringCommand

from halo_cluster.node import batch
from halo_cluster.node.pyinfra_internals import run

# what a part prints when its fact's `requires_command` is not installed; the script's own
# sentinel, read only here (pyinfra's, in its guard of a fact run alone, is private to it)
NO_COMMAND = "@@halo-read no-command"

Read = tuple[type, dict[str, Any]]

_CACHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # run -> {key: value}
_DECLARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # run -> reads_of(data)
_FETCHED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # run -> {host: Event}
_FAILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # run -> {host: [Read]}


def declare(reads_of: Callable[[Any], Iterable[Read]]) -> None:
    """What the deploy and the roles read on a node, as a function of its host data, for this
    run: the deploy hands it in (roles build on this package, never the other way round)."""
    _DECLARED[run()] = reads_of


def cached(host: Any, fact: type, **kwargs: Any) -> Any:
    """`host.get_fact(fact, **kwargs)`, read once per host and run (the state before changes):
    from the node's one command (`prefetch`), else on its own (a read nobody declared)."""
    prefetch(host)
    cache = _CACHES.setdefault(run(), {})
    key = _key(host, fact, kwargs)
    if key not in cache:
        cache[key] = host.get_fact(fact, **kwargs)
    return cache[key]


def _key(host: Any, fact: type, kwargs: dict[str, Any]) -> tuple:
    return (host.name, fact.__name__, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))


class NodeReads(FactBase[list[tuple[int, list[str]]]]):
    """Several commands in one (node/batch.py): [(exit status, stdout lines)], in the order
    given. Each runs in its own subshell (an `exit` in one ends only that one), all at once."""

    @staticmethod
    def default() -> list[tuple[int, list[str]]]:
        return []

    def command(self, parts: tuple[str, ...]) -> str:
        return batch.script(parts)

    def process(self, output: list[str]) -> list[tuple[int, list[str]]]:
        return split_output(output)


def split_output(output: list[str]) -> list[tuple[int, list[str]]]:
    """[(status, lines)] of each complete part, from a `batch.script`'s output as pyinfra gives
    it (its lines, newlines removed: put back for the parse's byte counts), each part's lines as
    pyinfra would have read its own command's output."""
    return [(part.status, part.lines) for part in batch.split("\n".join(output) + "\n")]


def join_output(results: Iterable[tuple[int, list[str]]]) -> list[str]:
    """What a script prints for these [(status, lines)], as pyinfra's lines: the inverse of
    `split_output` (the plan harness's answers)."""
    parts = [batch.Part(status, "".join(f"{line}\n" for line in lines).encode())
             for status, lines in results]  # fmt: skip
    text = batch.joined(parts).decode()
    return text.removesuffix("\n").split("\n") if text else []


def part_command(fact: type, kwargs: dict[str, Any]) -> str | None:
    """The command pyinfra runs for `fact(**kwargs)`, behind a `requires_command` guard as
    pyinfra's (which prints `NO_COMMAND`); None for a fact that cannot be one line of the script
    (read on its own, by `cached()`)."""
    instance = fact()
    if instance.shell_executable or type(instance).check_preconditions is not (
        FactBase.check_preconditions
    ):
        return None
    command = _text(instance.command(**kwargs))
    required = instance.requires_command(**kwargs)
    if required:
        command = (
            f"if command -v {_text(required)} >/dev/null 2>&1; then ( {command} ); "
            f"else echo '{NO_COMMAND}'; fi"
        )
    return None if "\n" in command else command


def _text(command: str | StringCommand) -> str:
    return command.get_raw_value() if isinstance(command, StringCommand) else str(command)


_MISSING = object()


def _value(fact: type, status: int, lines: list[str]) -> Any:
    """What `host.get_fact` returns for this output in the prepare stage; _MISSING where it
    would report an error (the read is then left to `cached()`, which asks pyinfra)."""
    instance = fact()
    if status != 0:
        return _MISSING
    if not lines or lines == [NO_COMMAND]:
        return instance.default()
    try:
        return instance.process(lines)
    except Exception:
        return _MISSING


def prefetch(host: Any) -> None:
    """Read everything declared for `host` in one command, once per run, whichever greenlet
    asks first: the head reads its workers' snapshots (the launcher role), and waits for a
    worker's read under way instead of reading again."""
    state = run()
    reads_of = _DECLARED.get(state)
    if reads_of is None:
        return
    fetched = _FETCHED.setdefault(state, {})
    if host.name in fetched:
        fetched[host.name].wait()
        return
    fetched[host.name] = done = gevent.event.Event()
    try:
        _fetch(host, reads_of(host.data), _CACHES.setdefault(state, {}))
    finally:
        done.set()


def _fetch(host: Any, reads: Iterable[Read], cache: dict) -> None:
    wanted: list[Read] = []
    parts: list[str] = []
    keys: set[tuple] = set()
    for fact, kwargs in reads:
        key = _key(host, fact, kwargs)
        if key in cache or key in keys:
            continue
        keys.add(key)
        command = part_command(fact, kwargs)
        if command is not None:
            wanted.append((fact, kwargs))
            parts.append(command)
    if not parts:
        return
    results = host.get_fact(NodeReads, parts=tuple(parts), _ignore_errors=True) or []
    if not results:  # the one command itself failed: each read is left to `cached()`
        return
    failed = _FAILED.setdefault(run(), {}).setdefault(host.name, [])
    for (fact, kwargs), command, (status, lines) in zip(wanted, parts, results, strict=False):
        value = _value(fact, status, lines)
        if value is _MISSING:
            value = _read_alone(host, fact, command)
        if value is _MISSING:
            failed.append((fact, kwargs))
        else:
            cache[_key(host, fact, kwargs)] = value


def _read_alone(host: Any, fact: type, command: str) -> Any:
    """A part that failed, read once more on its own: on a node that just booted, two rpm
    queries at once (RpmPackages, InstalledVersions) can fail on the database's first open, and a
    passing failure must not refuse the node."""
    results = host.get_fact(NodeReads, parts=(command,), _ignore_errors=True) or [(1, [])]
    status, lines = results[0]
    return _value(fact, status, lines)


def unreadable(host: Any) -> str | None:
    """Why the node cannot be deployed: each declared read whose command failed on it, with what
    to do (the fact's `unreadable_fix`, else the command to run there); None when all were read."""
    failed = _FAILED.get(run(), {}).get(host.name, [])
    reasons = []
    for fact, kwargs in failed:
        command = _text(fact().command(**kwargs))
        fix = getattr(fact, "unreadable_fix", None) or f"run `{command}` on the node to see why"
        reasons.append(f"{fact.__name__} could not be read: {fix}")
    return "; ".join(reasons) or None
