"""What `halo-cluster bench` says: a run's or `--compare`'s tables, what changed and the
verdict, as text or as one JSON document (`--json`), and a run that measured nothing."""

from __future__ import annotations

import sys
from pathlib import Path

from halo_cluster.config.model import Cluster
from halo_cluster.tools import jsonout
from halo_cluster.tools.bench import results, store
from halo_cluster.tools.commands.exits import ERROR


def said(line: dict, comparison: results.Comparison, previous: dict | None) -> list[str]:
    """The end of a run or `--compare`: the tables, what changed and the verdict."""
    lab = " (lab stand-in: not a model's numbers)" if line["lab"] else ""
    out = [
        f"bench {line['date']} ({line['file']}), config {line['config_id']}, "
        f"image {line['image_digest']}{lab}"
    ]
    out += results.level_table(line["levels"], comparison.deltas)
    if previous is None:
        out.append(f"bench: baseline: no earlier run of config {line['config_id']}")
        return out
    out.append(f"compared with {previous['date']} ({previous['file']}):")
    out += [f"  changed: {c}" for c in comparison.changed] or ["  changed: nothing in the key"]
    out += [f"  regression: {r}" for r in comparison.reasons]
    out.append(f"bench: {comparison.verdict}")
    return out


def compare_only(cluster: Cluster, folder: Path, as_json: bool = False) -> int:
    lines = store.read_index(folder)
    if not lines:
        return failed(f"no runs yet in {folder / 'index.jsonl'}: run halo-cluster bench", as_json)
    latest = lines[-1]
    previous = results.previous_of(lines, latest)
    comparison = results.compare(latest, previous, cluster.bench.tolerance)
    if as_json:
        jsonout.emit("bench", report_json(latest, comparison, previous) | {"chart": None})
    else:
        print("\n".join(said(latest, comparison, previous)))
    return comparison.exit_code


def failed(error: str, as_json: bool, nodes: dict[str, dict] | None = None) -> int:
    """A run that measured nothing: its line on stderr (each node's own, said already, when
    NODES were not reached), and with --json the document that says so, its numbers null
    (never 0)."""
    if as_json:
        found = {"exit_code": ERROR, "error": error, "verdict": None, "levels": None,
                 "run": None, "compared_to": None, "changed": [], "regressions": [], "deltas": {},
                 "chart": None, "nodes": nodes or {}}  # fmt: skip
        jsonout.emit("bench", found)
    if nodes is None:
        print(f"bench: {error}", file=sys.stderr)
    return ERROR


def report_json(line: dict, comparison: results.Comparison, previous: dict | None) -> dict:
    """The run's report for --json: its index line, the verdict and what it was compared with."""
    return {
        "exit_code": comparison.exit_code,
        "error": None,
        "verdict": comparison.verdict,
        "levels": line["levels"],
        "run": line,
        "compared_to": previous,
        "changed": list(comparison.changed),
        "regressions": list(comparison.reasons),
        "deltas": comparison.deltas,
        "nodes": {},  # every node was read
    }
