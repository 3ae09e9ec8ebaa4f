"""Read cluster.yml and check it against the schema: keys, types, choices and value rules.

`load_cluster(path)` is the one entry point: inventory.py, the testinfra conftest, drift and the
lab all use it. Problems are collected, not raised one by one, so the user sees every mistake in
one run; each is a single line `FILE: KEY.PATH: what is wrong`, and nothing is contacted before.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import yaml

from halo_cluster.model import DEFAULT_RAY_TOKEN, Cluster, ConfigError, Problems, derive
from halo_cluster.schema import REQUIRED, children_of


def load_cluster(path: str | Path) -> Cluster:
    """Read, validate and derive; raises ConfigError with every problem found."""
    path = Path(path)
    label = str(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError([f"{label}: cannot read: {exc.strerror}"]) from None
    raw = _parse_yaml(text, label)
    cluster = parse_cluster(raw, label, base_dir=path.parent)
    ensure_ray_token(cluster, path.parent)
    _check_key_files(cluster)
    return cluster


def parse_cluster(raw: Any, label: str = "cluster.yml", base_dir: Path | None = None) -> Cluster:
    problems = Problems(label)
    checker = _Checker(problems)
    doc = checker.mapping(raw, "")
    if doc is None:
        problems.raise_if_any()
    checker.walk(doc, "", "")
    if problems.fatal:
        problems.raise_if_any()
    cluster = derive(doc, problems, base_dir or Path.cwd())
    problems.raise_if_any()
    return cluster


def _check_key_files(cluster: Cluster) -> None:
    """A missing or unreadable SSH key stops here, naming the key and its nodes, not in paramiko."""
    users: dict[str, list[str]] = {}
    for node in cluster.nodes:
        if node.ssh_key:
            users.setdefault(node.ssh_key, []).append(node.name)
    problems = Problems(cluster.source)
    for key, nodes in users.items():
        if problem := _unreadable(key):
            problems.error("ssh.key", f"{key} {problem} (the SSH key of {', '.join(nodes)})")
    serve = cluster.serve
    files = {
        "api_key_file": serve.api_key_file,
        "hf_token_file": serve.hf_token_file,
        "ray_token_file": serve.ray_token_file,
    }
    for name, path in files.items():
        if serve.enabled and path and (problem := _unreadable(path) or _empty(path)):
            problems.error(f"serve.{name}", f"{path} {problem}")
    problems.raise_if_any()


def ensure_ray_token(cluster: Cluster, base_dir: Path) -> None:
    """Ray's cluster token when the config names none: made once on the controller (0600 in a
    0700 folder) and kept, so that every run gives the nodes the same token."""
    path = (base_dir / DEFAULT_RAY_TOKEN).resolve()
    if not cluster.serve.enabled or cluster.serve.ray_token_file != str(path) or path.exists():
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as token:
        token.write(secrets.token_hex(32) + "\n")


def _empty(path: str) -> str | None:
    return None if Path(path).read_text().strip() else "is empty"


def _unreadable(path: str) -> str | None:
    if os.access(path, os.R_OK):
        return None
    return "is missing" if not os.path.exists(path) else "cannot be read"


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last silently)."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict:
    seen: set = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _parse_yaml(text: str, label: str) -> Any:
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise ConfigError([f"{label}: {where}: YAML error: {exc.problem}"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([f"{label}: YAML error: {exc}"]) from None


class _Checker:
    """Type and key checks driven by the schema table; collects problems."""

    def __init__(self, problems: Problems) -> None:
        self.error = problems.error

    def mapping(self, value: Any, where: str) -> dict | None:
        if value is None and not where:
            self.error("", "the file is empty", fatal=True)
            return None
        if not isinstance(value, dict):
            self.error(where, f"expected a mapping, got {_type_name(value)}", fatal=True)
            return None
        return value

    def walk(self, doc: dict, schema_prefix: str, where: str) -> None:
        fields = children_of(schema_prefix)
        for key in doc:
            if key not in fields:
                known = ", ".join(sorted(fields))
                self.error(_join(where, str(key)), f"unknown key (known keys: {known})")
        for key, spec in fields.items():
            at = _join(where, key)
            if key not in doc or doc[key] is None:
                if spec.default is REQUIRED:
                    self.error(at, "required key is missing", fatal=True)
                continue
            if spec.choices and isinstance(doc[key], bool):
                # YAML 1.1 reads a bare `off`/`on` as a boolean; the user meant the word
                doc[key] = "on" if doc[key] else "off"
            value = doc[key]
            if not self._type_ok(value, spec.type, at):
                continue
            if spec.choices and value not in spec.choices:
                self.error(at, f"{value!r} is not one of: {', '.join(spec.choices)}", fatal=True)
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

    def _apply_rule(self, rule, value: Any, at: str) -> None:
        if isinstance(value, list):
            items = [(f"{at}[{i}]", item) for i, item in enumerate(value)]
        elif isinstance(value, dict):  # a map of strings: the rule sees each (key, value)
            items = [(f"{at}.{key}", (key, item)) for key, item in value.items()]
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
            "number": isinstance(value, int | float) and not isinstance(value, bool),
            "map of strings": isinstance(value, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()),
        }[type_name]
        if not ok:
            self.error(at, f"expected {type_name}, got {_type_name(value)} {value!r}", fatal=True)
        return ok


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
