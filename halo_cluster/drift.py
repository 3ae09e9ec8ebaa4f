"""Drift check: a dry run that says per node what would change, with file diffs.

    python -m halo_cluster.drift [--json-out reports/drift.json]

Exit status: 0 nothing would change, 2 drift (something would change), 1 error (bad config,
unreachable host, failed dry run). It never changes a host: it runs `pyinfra --dry`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NO_DRIFT, ERROR, DRIFT = 0, 1, 2
_DIFF_START = re.compile(r"^    \[(?P<node>[^\]]+)\] Will (?:modify|create) (?P<path>\S+)$")
_HOST_LINE = re.compile(r"^    \[(?P<node>[^\]]+)\] (?P<text>.*)$")
_ERROR_MARKERS = ("Could not connect", "Error:", "pyinfra error", "could not load fact")


def dry_run(config: str) -> subprocess.CompletedProcess:
    pyinfra = str(Path(sys.executable).parent / "pyinfra")
    return subprocess.run(
        [pyinfra, "--dry", "--diff", "--json", "inventory.py", "deploy.py"],
        cwd=ROOT,
        env=dict(os.environ, CLUSTER_CONFIG=config),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def parse_diffs(log: str) -> dict[str, dict[str, list[str]]]:
    """{node: {path: diff lines}} from pyinfra's --diff output."""
    diffs: dict[str, dict[str, list[str]]] = {}
    current: list[str] | None = None
    for line in log.splitlines():
        start = _DIFF_START.match(line)
        if start:
            current = diffs.setdefault(start["node"], {}).setdefault(start["path"], [])
        elif current is not None and line.startswith("      "):
            current.append(line[6:])
        else:
            current = None
    return diffs


def errors(result: subprocess.CompletedProcess) -> list[str]:
    found = [
        line.strip()
        for line in result.stderr.splitlines()
        if any(marker in line for marker in _ERROR_MARKERS)
    ]
    if result.returncode != 0 and not found:
        # a config refused by inventory.py: its one-line problems, without pyinfra's progress
        lines = [line for line in result.stderr.splitlines() if line and not line.startswith("-->")]
        found = lines or [f"pyinfra exited with {result.returncode}"]
    return found


def summarize(result: subprocess.CompletedProcess) -> dict:
    problems = errors(result)
    if problems:
        return {"exit_code": ERROR, "errors": problems, "nodes": {}}
    plan = json.loads(result.stdout)["plan"]
    diffs = parse_diffs(result.stderr)
    nodes: dict[str, list[dict]] = {}
    for op in plan:
        for node in op["hosts_with_change"]:
            # our operations that write a file end their name with its path
            path = next((p for p in diffs.get(node, {}) if op["name"].endswith(f" {p}")), None)
            nodes.setdefault(node, []).append(
                {
                    "operation": op["name"],
                    "path": path,
                    "diff": diffs.get(node, {}).get(path, []) if path else [],
                }
            )
    return {"exit_code": DRIFT if nodes else NO_DRIFT, "errors": [], "nodes": nodes}


def report(summary: dict) -> str:
    if summary["errors"]:
        return "\n".join(f"drift: error: {e}" for e in summary["errors"])
    if not summary["nodes"]:
        return "drift: none, every node is converged"
    lines = []
    for node, changes in sorted(summary["nodes"].items()):
        lines.append(f"{node}: {len(changes)} pending change(s)")
        for change in changes:
            lines.append(f"  - {change['operation']}")
            lines += [f"      {line}" for line in change["diff"]]
    lines.append(
        f"drift: {sum(len(c) for c in summary['nodes'].values())} pending change(s) "
        f"on {len(summary['nodes'])} node(s)"
    )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m halo_cluster.drift", description=__doc__)
    parser.add_argument(
        "--json-out",
        default=str(ROOT / "reports" / "drift.json"),
        help="machine-readable summary (default: reports/drift.json)",
    )
    args = parser.parse_args(argv)
    config = os.environ.get("CLUSTER_CONFIG") or str(ROOT / "cluster.yml")
    summary = summarize(dry_run(config))
    summary["config"] = config
    print(report(summary))
    out = Path(args.json_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    return summary["exit_code"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
