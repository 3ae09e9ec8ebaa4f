"""Read cluster.yml and check it against the schema: keys, types, choices and value rules.

`load_cluster(path)` is the one entry point: inventory.py, the testinfra conftest, drift and the
lab all use it. Problems are collected, not raised one by one, so the user sees every mistake in
one run; each is a single line `FILE: KEY.PATH: what is wrong`, and nothing is contacted before.
"""

from __future__ import annotations

import re
import shlex
import stat
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from halo_cluster.config import quoting
from halo_cluster.config.model import Cluster, ConfigError, Problems, derive
from halo_cluster.config.quoting import quote
from halo_cluster.config.rules import file_path
from halo_cluster.config.schema import REQUIRED, Field, current

MAX_BYTES = 1024 * 1024  # a cluster.yml is a few KiB; more is not a config
MAX_DEPTH = 10  # the schema needs 5 levels (nodes[].ssh.host); an alias may not add more
MAX_NODES = 10_000  # YAML nodes after expanding aliases: a billion laughs stops here
MAX_INTEGER_DIGITS = 30  # Python refuses to convert more than 4300 digits, with a ValueError
MAX_KEY = 64  # longer than any schema key or variable name a message needs to show whole
SECRET_MAX_BYTES = 4096  # an API key or token is one short line
BOOL_TAG = "tag:yaml.org,2002:bool"
MERGE_TAG = "tag:yaml.org,2002:merge"


def load_cluster(path: str | Path) -> Cluster:
    """Read, validate and derive; raises ConfigError with every problem found. Warnings (doubts
    that do not stop the run) are printed to stderr and kept in `cluster.warnings`."""
    path = Path(path)
    if problem := file_path(str(path)):  # --config's or $CLUSTER_CONFIG's: any text
        raise ConfigError([f"the config's path: {problem}"])
    label = quoting.path(str(path))  # every problem's first word
    raw, written = _parse_yaml(_read_config(path, label), label)
    cluster = parse_cluster(raw, label, base_dir=path.parent, written=written)
    cluster = replace(cluster, warnings=(*cluster.warnings, *_check_files(cluster, path.parent)))
    for line in cluster.warnings:
        print(line, file=sys.stderr)
    return cluster


def parse_cluster(
    raw: Any,
    label: str = "cluster.yml",
    base_dir: Path | None = None,
    written: dict[str, str] | None = None,
) -> Cluster:
    """Check and derive a parsed document; `written` holds the text of each YAML 1.1 boolean by
    its key path, so that a message quotes what the user wrote (`no`, not false)."""
    problems = Problems(label)
    checker = _Checker(problems, written or {})
    doc = checker.mapping(raw, "")
    if doc is None:
        problems.raise_if_any()
    checker.walk(doc, "", "")
    if problems.fatal:
        problems.raise_if_any()
    cluster = derive(doc, problems, base_dir or Path.cwd())
    problems.raise_if_any()
    return cluster


def _read_config(path: Path, label: str) -> str:
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


def _check_files(cluster: Cluster, base_dir: Path) -> list[str]:
    """SSH keys, known_hosts and the files each section prepares (`Derivation.prepare`: secret
    files) on the controller: a missing, unreadable or malformed one stops here, naming the key
    (and the nodes that use it), not in paramiko or in a container. Returns the warnings (a
    secret others can read)."""
    problems = Problems(cluster.source)
    for what, key, attribute in (
        ("the SSH key", "ssh.key", "ssh_key"),
        ("the known_hosts", "ssh.known_hosts", "ssh_known_hosts"),
    ):
        users: dict[str, list[str]] = {}
        for node in cluster.nodes:
            if path := getattr(node, attribute):
                users.setdefault(path, []).append(node.name)
        for path, nodes in users.items():
            optional = attribute == "ssh_known_hosts"  # ssh creates a missing known_hosts
            if problem := _file_problem(path, optional):
                problems.error(key, f"{path} {problem} ({what} of {', '.join(nodes)})")
    for derivation in current().derivations:
        if derivation.prepare:
            derivation.prepare(cluster, problems, base_dir)
    problems.raise_if_any()
    return problems.warnings


def _file_problem(path: str, optional: bool = False) -> str | None:
    try:
        mode = Path(path).stat().st_mode
    except FileNotFoundError:
        return None if optional else "is missing"
    except OSError:
        return "cannot be read"
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    try:
        with open(path, "rb"):
            return None
    except OSError:
        return "cannot be read"


def check_secret(key: str, path: str, problems: Problems) -> None:
    """A secret file: a regular file of one printable UTF-8 line, at most 4 KiB, read in bounded
    memory; a second line would become a second variable in the container's environment."""
    problem = _file_problem(path)
    if problem is None:
        problem = _secret_text_problem(path)
    if problem:
        problems.error(key, f"{path} {problem}")
    elif Path(path).stat().st_mode & 0o044:
        problems.warn(key, f"{path} is readable by other users: chmod 600 {shlex.quote(path)}")


def _secret_text_problem(path: str) -> str | None:
    try:
        with open(path, "rb") as stream:
            data = stream.read(SECRET_MAX_BYTES + 1)
    except OSError:
        return "cannot be read"
    if len(data) > SECRET_MAX_BYTES:
        return f"is larger than {SECRET_MAX_BYTES // 1024} KiB: a secret file holds one line"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "is not UTF-8 text"
    line = text.removesuffix("\n")
    if "\r" in line:
        return "has Windows line endings (CRLF): save it with LF endings (dos2unix FILE)"
    if not line.strip():
        return "is empty"
    if "\n" in line:
        return "has more than one line: it holds the secret alone, on one line"
    if not line.isprintable():
        return "holds control characters: it holds the secret alone, on one line"
    return None


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
                _written_booleans(value, _join(where, str(key.value)), found)


def _parse_yaml(text: str, label: str) -> tuple[Any, dict[str, str]]:
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


class _Checker:
    """Type and key checks driven by the schema table; collects problems."""

    def __init__(self, problems: Problems, written: dict[str, str]) -> None:
        self.error = problems.error
        self.written = written

    def mapping(self, value: Any, where: str) -> dict | None:
        if value is None and not where:
            self.error("", "the file is empty", fatal=True)
            return None
        if not isinstance(value, dict):
            self.error(where, f"expected a mapping, got {_type_name(value)}", fatal=True)
            return None
        return value

    def walk(self, doc: dict, schema_prefix: str, where: str) -> None:
        fields = current().children_of(schema_prefix)
        for key in doc:
            if key not in fields:
                known = ", ".join(sorted(fields))
                self.error(_join(where, _key_text(key)), f"unknown key (known keys: {known})")
        for key, spec in fields.items():
            at = _join(where, key)
            if key not in doc or doc[key] is None:
                if spec.default is REQUIRED:
                    self.error(at, "required key is missing", fatal=True)
                continue
            word = spec.choices and isinstance(doc[key], bool)
            if word and not self._as_word(doc, key, spec, at):
                continue
            value = doc[key]
            if not self._type_ok(value, spec.type, at):
                continue
            if spec.choices and value not in spec.choices:
                choices = ", ".join(spec.choices)
                self.error(at, f"{quote(value)} is not one of: {choices}", fatal=True)
            if spec.rule:
                self._apply_rule(spec.rule, value, at)
            if spec.type == "mapping":
                self.walk(value, spec.path, at)
            elif spec.type == "list of mappings":
                if not value:
                    self.error(at, "must list at least one entry", fatal=True)
                for i, item in enumerate(value):
                    if self.mapping(item, f"{at}[{i}]") is not None:
                        self.walk(item, spec.path + "[]", f"{at}[{i}]")

    def _as_word(self, doc: dict, key: str, spec: Field, at: str) -> bool:
        """YAML 1.1 reads a bare `off`, `on`, `no`, `yes` as a boolean where a word is meant:
        the word when it is a choice (`iommu: off`), else a message quoting what was written."""
        choices = spec.choices
        text = self._written(doc[key], at)
        if text.lower() in choices:
            doc[key] = text.lower()
            return True
        read = str(doc[key]).lower()
        self.error(at, f"{quote(text)} (read as {read}) is not one of: {', '.join(choices)}", True)
        return False

    def _written(self, value: bool, at: str) -> str:
        return self.written.get(at, "on" if value else "off")

    def _apply_rule(self, rule, value: Any, at: str) -> None:
        if isinstance(value, list):
            items = [(f"{at}[{i}]", item) for i, item in enumerate(value)]
        elif isinstance(value, dict):  # a map of strings: the rule sees each (key, value)
            items = [(_join(at, _key_text(key)), (key, item)) for key, item in value.items()]
        else:
            items = [(at, value)]
        for where, item in items:
            problem = rule(item)
            if problem:
                self.error(where, problem, fatal=True)

    def _type_ok(self, value: Any, type_name: str, at: str) -> bool:
        ok = {
            "string": isinstance(value, str) and value != "",
            "integer": isinstance(value, int) and not isinstance(value, bool),
            "boolean": isinstance(value, bool),
            "mapping": isinstance(value, dict),
            "list of mappings": isinstance(value, list),
            "list of strings": isinstance(value, list) and all(isinstance(v, str) for v in value),
            "list of integers": isinstance(value, list)
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value),
            "number": isinstance(value, int | float) and not isinstance(value, bool),
            "map of strings": isinstance(value, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()),
        }[type_name]
        if not ok:
            shown = quote(value)
            if isinstance(value, bool) and at in self.written:
                shown = f"{quote(self.written[at])} (read as {str(value).lower()})"
            self.error(at, f"expected {type_name}, got {_type_name(value)} {shown}", fatal=True)
        return ok


def _key_text(key: Any) -> str:
    """A key as a message shows it: a plain name whole, anything else quoted and cut."""
    text = str(key) if isinstance(key, str | int | float | bool) or key is None else quote(key)
    return text if re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", text) else quote(text)


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _type_name(value: Any) -> str:
    names = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "list",
        dict: "mapping",
        type(None): "nothing",
    }
    return names.get(type(value), type(value).__name__)
