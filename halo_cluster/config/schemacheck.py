"""A parsed cluster.yml checked against the schema: unknown keys, types, choices and value rules.

`Checker` walks the document by the schema's table (`schema.current()`), collecting every
problem in `Problems` with the key path it is at (`nodes[0].ssh.host`), so the user sees every
mistake in one run.
"""

from __future__ import annotations

import re
from typing import Any

from halo_cluster.config.model import Problems
from halo_cluster.config.quoting import quote
from halo_cluster.config.schema import REQUIRED, Field, current


class Checker:
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
                self.error(key_path(where, key_text(key)), f"unknown key (known keys: {known})")
        for key, spec in fields.items():
            at = key_path(where, key)
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
        the word when it is a choice (`iommu: off`, `Field.word`), else a message quoting what
        was written."""
        word = spec.word(doc[key], self.written.get(at))
        if word is not None:
            doc[key] = word
            return True
        text, read = self._written(doc[key], at), str(doc[key]).lower()
        choices = ", ".join(spec.choices)
        self.error(at, f"{quote(text)} (read as {read}) is not one of: {choices}", True)
        return False

    def _written(self, value: bool, at: str) -> str:
        return self.written.get(at, "on" if value else "off")

    def _apply_rule(self, rule, value: Any, at: str) -> None:
        if isinstance(value, list):
            items = [(f"{at}[{i}]", item) for i, item in enumerate(value)]
        elif isinstance(value, dict):  # a map of strings: the rule sees each (key, value)
            items = [(key_path(at, key_text(key)), (key, item)) for key, item in value.items()]
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
        if not ok and type_name == "list of strings" and isinstance(value, list):
            at, value = next(
                ((f"{at}[{i}]", v) for i, v in enumerate(value) if isinstance(v, bool)), (at, value)
            )
            type_name = "string" if isinstance(value, bool) else type_name  # the item is named
        if not ok:
            shown = quote(value)
            if isinstance(value, bool) and at in self.written:
                shown = f"{quote(self.written[at])} (read as {str(value).lower()})"
                if type_name == "string":  # the word was meant: YAML took it for a boolean
                    shown += f"; to mean the word, quote it: {quote(self.written[at])}"
            self.error(at, f"expected {type_name}, got {_type_name(value)} {shown}", fatal=True)
        return ok


def key_text(key: Any) -> str:
    """A key as a message shows it: a plain name whole, anything else quoted and cut."""
    text = str(key) if isinstance(key, str | int | float | bool) or key is None else quote(key)
    return text if re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", text) else quote(text)


def key_path(where: str, key: str) -> str:
    """The path a message names a key by (`nodes[0].ssh.host`), as the YAML reader keys the
    booleans it keeps."""
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
