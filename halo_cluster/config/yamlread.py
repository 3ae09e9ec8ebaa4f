"""cluster.yml's text read into a plain document, in bounded time and memory.

A regular file of at most 1 MiB of UTF-8; PyYAML's SafeLoader with nesting bounded while
composing, aliases measured before they are expanded, a key given twice refused and integers of
a sane length; the text of every YAML 1.1 boolean kept by its key path, so that a message quotes
what the user wrote. Anything that is no plain config is one line naming the file and the place.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import yaml

from halo_cluster.config.model import ConfigError
from halo_cluster.config.quoting import quote
from halo_cluster.config.schemacheck import key_path

MAX_BYTES = 1024 * 1024  # a cluster.yml is a few KiB; more is not a config
MAX_DEPTH = 10  # the schema needs 5 levels (nodes[].ssh.host); an alias may not add more
MAX_NODES = 10_000  # YAML nodes after expanding aliases: a billion laughs stops here
MAX_INTEGER_DIGITS = 30  # Python refuses to convert more than 4300 digits, with a ValueError
MAX_KEY = 64  # longer than any schema key or variable name a message needs to show whole
BOOL_TAG = "tag:yaml.org,2002:bool"
MERGE_TAG = "tag:yaml.org,2002:merge"


def read_config(path: Path, label: str) -> str:
    """The file as text, read in bounded memory: a regular file of at most 1 MiB of UTF-8."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise ConfigError([f"{label}: is not a regular file"])
        with path.open("rb") as stream:
            data = stream.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError([f"{label}: cannot read: {exc.strerror}"]) from None
    if len(data) > MAX_BYTES:
        raise ConfigError([f"{label}: larger than {MAX_BYTES // 1024} KiB: not a cluster.yml"])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{label}: is not UTF-8 text (byte {exc.start + 1})"]) from None


class _ConfigLoader(yaml.SafeLoader):
    """SafeLoader for a plain config: nesting bounded while composing (never a RecursionError),
    keys kept as the text the user wrote, a key given twice refused (PyYAML keeps the last
    silently), integers of a sane length."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.depth >= MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(
                None, None, f"nested deeper than {MAX_DEPTH} levels: not a cluster.yml", mark
            )
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _construct_mapping(loader: _ConfigLoader, node: yaml.MappingNode) -> dict:
    seen: set[str] = set()
    for key_node, _ in node.value:
        if key_node.tag == MERGE_TAG:
            continue
        if key_node.value in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {quote(key_node.value)}", key_node.start_mark
            )
        seen.add(key_node.value)
    loader.flatten_mapping(node)
    return {key.value: loader.construct_object(value) for key, value in node.value}


def _construct_int(loader: _ConfigLoader, node: yaml.ScalarNode) -> int:
    if len(node.value) > MAX_INTEGER_DIGITS:
        raise yaml.constructor.ConstructorError(
            None, None, f"an integer of more than {MAX_INTEGER_DIGITS} digits", node.start_mark
        )
    return loader.construct_yaml_int(node)


def _construct_timestamp(loader: _ConfigLoader, node: yaml.ScalarNode) -> object:
    """A bare date that is no day (`2026-13-45`): refused at its line, not by datetime alone."""
    try:
        return loader.construct_yaml_timestamp(node)
    except ValueError as exc:
        raise yaml.constructor.ConstructorError(
            None, None, f"{quote(node.value)} is no date: {exc}", node.start_mark
        ) from None


_ConfigLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_ConfigLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_ConfigLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)


class _Refused(Exception):
    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.mark = mark


def _measure(node: yaml.Node, depth: int, memo: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(nodes, height) of `node` with its aliases expanded, each distinct node measured once:
    bounded time whatever the aliases multiply to, and an alias cycle ends at MAX_DEPTH."""
    if id(node) in memo:
        size, height = memo[id(node)]
    else:
        if depth > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels", node.start_mark)
        size, height = 1, 0
        for child in _children(node):
            child_size, child_height = _measure(child, depth + 1, memo)
            size, height = size + child_size, max(height, child_height + 1)
            if size > MAX_NODES:
                raise _Refused(
                    f"aliases expand to more than {MAX_NODES} values: not a cluster.yml",
                    node.start_mark,
                )
        memo[id(node)] = (size, height)
    if depth + height > MAX_DEPTH:
        raise _Refused(f"nested deeper than {MAX_DEPTH} levels", node.start_mark)
    return size, height


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if not isinstance(node, yaml.MappingNode):
        return []
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode):
            raise _Refused("a key must be a plain name, not a list or a mapping", key.start_mark)
    return [child for pair in node.value for child in pair]


def _written_booleans(node: yaml.Node, where: str, found: dict[str, str]) -> None:
    """The text of every YAML 1.1 boolean (yes, no, on, off...) by the key path the checker uses."""
    if isinstance(node, yaml.ScalarNode) and node.tag == BOOL_TAG:
        found.setdefault(where, node.value)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _written_booleans(item, f"{where}[{i}]", found)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if len(str(key.value)) <= MAX_KEY:  # a longer key is no schema key
                _written_booleans(value, key_path(where, str(key.value)), found)


def parse_yaml(text: str, label: str) -> tuple[Any, dict[str, str]]:
    """The document and the text of its booleans; one line for any YAML that is no plain config,
    in bounded time and memory."""
    loader = None
    try:
        loader = _ConfigLoader(text)  # the reader refuses control characters here already
        node = loader.get_single_node()
        if node is None:
            return None, {}
        _measure(node, 0, {})
        written: dict[str, str] = {}
        _written_booleans(node, "", written)
        return loader.construct_document(node), written
    except _Refused as exc:
        raise ConfigError([f"{label}: {_where(exc.mark)}: {exc}"]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = _one_line(exc.problem or exc.context or "malformed")
        raise ConfigError([f"{label}: {_where(mark)}: YAML error: {problem}"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([f"{label}: YAML error: {_one_line(str(exc))}"]) from None
    except (ValueError, RecursionError) as exc:  # a value PyYAML cannot build (no mark)
        raise ConfigError([f"{label}: YAML error: {_one_line(str(exc))}"]) from None
    finally:
        if loader is not None:
            loader.dispose()


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"


def _one_line(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
