"""The cluster model: `Cluster` of `Node`s, every value the roles need, and `Problems`, the
`FILE: KEY: what is wrong` lines a config's mistakes are reported by.

`derive.derive()` builds a `Cluster` from a checked cluster.yml document; the classes here have no
defaults (the schema's are the only ones).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, fields
from typing import Any

from halo_cluster.config.schema import host_name


class ConfigError(Exception):
    """The configuration is invalid; `problems` holds one line per mistake."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class Problems:
    """Collects `FILE: KEY: what is wrong` lines, so the user sees every mistake in one run."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.lines: list[str] = []
        self.warnings: list[str] = []
        self.fatal = False  # a problem that makes deriving values impossible (type, missing key)

    def error(self, where: str, message: str, fatal: bool = False) -> None:
        self.fatal = self.fatal or fatal
        self.lines.append(f"{self.label}: {where + ': ' if where else ''}{message}")

    def warn(self, where: str, message: str) -> None:
        """A doubt that does not stop the run: printed by the loader."""
        self.warnings.append(f"{self.label}: {where + ': ' if where else ''}warning: {message}")

    def raise_if_any(self) -> None:
        if self.lines:
            raise ConfigError(self.lines)


@dataclass(frozen=True)
class Node:
    name: str
    role: str
    ssh_host: str
    ssh_port: int
    ssh_user: str
    ssh_key: str | None
    ssh_known_hosts: str | None
    interface: str | None  # name, "auto", or None when bound by MAC
    mac: str | None
    address: str


@dataclass(frozen=True)
class Cluster:
    """The whole cluster, every field set by `derive` (defaults are the schema's).

    A role's values are reached by their host data name without `halo_`: `cluster.NAME` is the
    dataclass section NAME derives, `cluster.NAME_FIELD` one of its fields, `cluster.KEY` a plain
    key (dots as `_`). The roles own those keys, so this class names none of them."""

    source: str
    interconnect: str
    subnet: ipaddress.IPv4Network
    cluster_user: str
    image: str
    toolbox: str
    max_latency_us: int
    min_bandwidth_gbps: int
    nodes: tuple[Node, ...]
    warnings: tuple[str, ...]
    # every plain key by its path, as written or the schema's default: a role's own key reaches
    # its host data from here, without a field or a derivation of its own
    settings: dict[str, Any]
    # each section's derived values by its name (`Derivation.derive`): a dataclass, or None
    derived: dict[str, Any]

    @property
    def head(self) -> Node:
        return next(n for n in self.nodes if n.role == "head")

    @property
    def workers(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.role == "worker")

    def values(self) -> dict[str, Any]:
        """Every role's value by its host data name: the plain keys, each replaced by what a
        section derives for it (a file name resolved, not as written)."""
        found = {host_name(path): value for path, value in self.settings.items()}
        for name, value in self.derived.items():
            if value is not None:
                found |= {
                    host_name(f"{name}.{f.name}"): getattr(value, f.name) for f in fields(value)
                }
        return found

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # copy and pickle probe an instance before its fields are set
            raise AttributeError(name)
        if name in self.derived:
            return self.derived[name]
        try:
            return self.values()[host_name(name)]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no value {name!r}") from None
