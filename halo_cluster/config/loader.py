"""Read cluster.yml and check it against the schema: keys, types, choices and value rules.

`load_cluster(path)` is the one entry point: inventory.py, the testinfra conftest, drift and the
lab all use it. Problems are collected, not raised one by one, so the user sees every mistake in
one run; each is a single line `FILE: KEY.PATH: what is wrong`, and nothing is contacted before.
The steps are modules of their own: the YAML read (`yamlread.py`), a section's key naming a
file of its keys expanded into the document (`presets.py`), the schema walk
(`schemacheck.py`), the derivation (`derive.py`) and the files checked on the controller
(`filecheck.py`).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from halo_cluster.config import quoting
from halo_cluster.config.derive import derive
from halo_cluster.config.filecheck import check_files
from halo_cluster.config.model import Cluster, ConfigError, Problems
from halo_cluster.config.presets import expand
from halo_cluster.config.rules import file_path
from halo_cluster.config.schemacheck import Checker
from halo_cluster.config.yamlread import parse_yaml, read_config


def load_cluster(path: str | Path) -> Cluster:
    """Read, validate and derive; raises ConfigError with every problem found. Warnings (doubts
    that do not stop the run) are printed to stderr and kept in `cluster.warnings`."""
    path = Path(path)
    if problem := file_path(str(path)):  # --config's or $CLUSTER_CONFIG's: any text
        raise ConfigError([f"the config's path: {problem}"])
    label = quoting.path(str(path))  # every problem's first word
    raw, written = parse_yaml(read_config(path, label), label)
    cluster = parse_cluster(raw, label, base_dir=path.parent, written=written)
    cluster = replace(cluster, warnings=(*cluster.warnings, *check_files(cluster, path.parent)))
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
    checker = Checker(problems, written or {})
    doc = checker.mapping(raw, "")
    if doc is None:
        problems.raise_if_any()
    base_dir = base_dir or Path.cwd()
    expand(doc, problems, base_dir)  # a named file's keys, walked with the user's
    checker.walk(doc, "", "")
    if problems.fatal:
        problems.raise_if_any()
    cluster = derive(doc, problems, base_dir)
    problems.raise_if_any()
    return cluster
