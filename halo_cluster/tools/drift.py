"""Drift check: a dry run that says per node what would change, with file diffs.

    halo-cluster drift [--config PATH] [--json] [--json-out PATH] [--md-out PATH]

Exit status: 0 nothing would change, 2 drift (something would change), 1 error (bad config, a
node unreachable or refused by the safety checks; the other nodes are still reported). It never
changes a host: it runs `pyinfra --dry`. `--json` prints the summary as JSON instead of text.

Where each answer comes from: which operations would change which node, from pyinfra's `--json`
plan; refusals and file diffs, from the deploy's own structured events ($HALO_REPORT, see
`halo_cluster.node.report`); why a node could not be reached, from pyinfra's log (the only thing it
reports nowhere else), and what it says, from the tool's own ssh (transport.py, reach.py:
paramiko's "Unable to connect" names no cause).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from halo_cluster.config import state
from halo_cluster.config.loader import ConfigError
from halo_cluster.config.rules import file_path
from halo_cluster.node.report import REPORT_ENV
from halo_cluster.tools import jsonout, options, reach, selection, transport
from halo_cluster.tools.project import PYINFRA, config, load, next_deploy, reports

NO_DRIFT, ERROR, DRIFT = 0, 1, 2
CONVERGED, PENDING, REFUSED, UNREACHABLE = "converged", "drift", "refused", "unreachable"
FAILED = "failed"  # reached, but the deploy code stopped before every role was planned
_CONNECT_ERRORS = ("SSH error", "Could not connect", "could not load fact", "Authentication")


def dry_run(
    config: str, events: Path, entry: Path, only: Sequence[str] = ()
) -> subprocess.CompletedProcess:
    """pyinfra's dry run of deploy.py in `entry`, the checkout or the wheel's copy; on the nodes
    named in `only` when given (pyinfra's --limit)."""
    limits = [word for name in only for word in ("--limit", selection.pyinfra_name(name))]
    return subprocess.run(
        [*PYINFRA, "--dry", "--json", *limits, "inventory.py", "deploy.py"],
        cwd=entry,
        # pyinfra runs in `entry`: a config path relative to here must still name the file
        env=dict(
            os.environ, CLUSTER_CONFIG=str(Path(config).resolve()), **{REPORT_ENV: str(events)}
        ),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def _plan(stdout: str) -> list[dict]:
    """pyinfra's --json plan; absent when no node got as far as planning."""
    start = stdout.find("{")
    return json.loads(stdout[start:])["plan"] if start >= 0 else []


def _read_events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _connect_error(log: str, node: str) -> str:
    for line in log.splitlines():
        if f"[{node}]" in line and any(m in line for m in _CONNECT_ERRORS):
            return line.strip().removeprefix(f"[{node}] ")
    return "not planned: unreachable or failed before planning (see pyinfra's output)"


def _last_error(log: str) -> str:
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if "rror" in line or "xception" in line]
    return (errors or lines or ["the dry run failed"])[-1]


def summarize(nodes: list[str], result: subprocess.CompletedProcess, events: list[dict]) -> dict:
    plan = _plan(result.stdout)
    reached = {e["node"] for e in events if e["kind"] == "reached"}
    planned = {e["node"] for e in events if e["kind"] == "planned"}
    refusals = {e["node"]: e["reason"] for e in events if e["kind"] == "refused"}
    summary: dict = {"exit_code": NO_DRIFT, "errors": [], "nodes": {}}
    for node in nodes:
        refusal = refusals.get(node)
        changes = [op["name"] for op in plan if node in op["hosts_with_change"]]
        entry = {
            "status": PENDING if changes else CONVERGED,
            "reason": None,
            "changes": changes,
            "files": {
                e["path"]: e["lines"] for e in events if e["node"] == node and e["kind"] == "diff"
            },
            "images": [
                f"{node}: {e['container']} runs {_digest(e['running'])}, the cluster "
                f"{_digest(e['cluster'])}"
                for e in events
                if e["node"] == node and e["kind"] == "image-mismatch"
            ],
        }
        if refusal:
            entry.update(status=REFUSED, reason=refusal, changes=[], files={}, images=[])
        elif node not in reached:
            reason = _connect_error(result.stderr, node)
            # what a dry run that did not reach the node cannot say: null, never a list's "unknown"
            unknown = dict.fromkeys(("changes", "files", "images"))
            entry.update(status=UNREACHABLE, reason=reason, **unknown)
        elif node not in planned:
            entry.update(status=FAILED, reason=_last_error(result.stderr), changes=[], files={})
        summary["nodes"][node] = entry
    statuses = {entry["status"] for entry in summary["nodes"].values()}
    if statuses & {REFUSED, UNREACHABLE, FAILED}:
        summary["exit_code"] = ERROR
        summary["errors"] = _errors(summary)
    elif PENDING in statuses:
        summary["exit_code"] = DRIFT
    return summary


def _errors(summary: dict) -> list[str]:
    """One line per node in error, as the text report says it."""
    return [
        f"{node}: {e['status']}: {e['reason']}"
        for node, e in summary["nodes"].items()
        if e["status"] in (REFUSED, UNREACHABLE, FAILED)
    ]


def _digest(reference: str) -> str:
    """A container's image as drift names it: its digest, or the reference when it has none."""
    return reference.partition("@")[2] or reference


def report(summary: dict) -> str:
    lines = [summary["next_deploy"]] if summary.get("next_deploy") else []
    for node, entry in summary["nodes"].items():
        if entry["status"] in (REFUSED, UNREACHABLE, FAILED):
            lines.append(f"{node}: {entry['status']}: {entry['reason']}")
        elif entry["status"] == PENDING:
            lines.append(f"{node}: {len(entry['changes'])} pending change(s)")
            lines += [f"  {line}" for line in entry["images"]]
            lines += [f"  - {change}" for change in entry["changes"]]
            for diff in entry["files"].values():
                lines += [f"      {line}" for line in diff]
        else:
            lines.append(f"{node}: converged")
    lines.append(_verdict(summary))
    return "\n".join(lines)


def _verdict(summary: dict) -> str:
    pending = [e for e in summary["nodes"].values() if e["status"] == PENDING]
    if summary["exit_code"] == ERROR and summary.get("config_errors"):
        return "drift: error: the config is refused"
    if summary["exit_code"] == ERROR:
        others = len(summary["nodes"]) - len(summary["errors"])
        tail = f"; the other {others} are listed above" if others else ""
        return f"drift: error on {len(summary['errors'])} node(s){tail}"
    if not pending:
        return "drift: none, every node is converged"
    count = sum(len(e["changes"]) for e in pending)
    return f"drift: {count} pending change(s) on {len(pending)} node(s)"


def markdown(summary: dict) -> str:
    """The same summary for a CI job summary or a pull-request comment."""
    lines = [f"## halo-cluster drift: {_verdict(summary).removeprefix('drift: ')}", ""]
    lines += [f"- config error: {e}" for e in summary.get("config_errors", [])]
    if summary["nodes"]:
        lines += ["| node | status | detail |", "|---|---|---|"]
    for node, entry in summary["nodes"].items():
        detail = entry["reason"] or "<br>".join(f"`{c}`" for c in entry["changes"]) or "-"
        lines.append(f"| {node} | {entry['status']} | {detail.replace('|', '/')} |")
    for node, entry in summary["nodes"].items():
        if entry["status"] == UNREACHABLE:
            continue  # its files are unknown
        for path, diff in entry["files"].items():
            lines += ["", f"<details><summary>{node}: {path}</summary>", "", "```diff", *diff]
            lines += ["```", "", "</details>"]
    return "\n".join(lines) + "\n"


def run(config: str, entry: Path, limit: Sequence[str] = (), exclude: Sequence[str] = ()) -> dict:
    """The summary of the selected nodes (`--limit`, `--exclude`: selection.py); a selection
    refused is its `usage_error`, before any host is contacted."""
    try:
        cluster = load(config)
    except ConfigError as error:
        problems = error.problems
        return {"exit_code": ERROR, "errors": problems, "config_errors": problems, "nodes": {},
                "next_deploy": None, "left_out": []}  # fmt: skip
    try:
        chosen = selection.select(cluster, limit, exclude)
    except selection.Refused as refused:
        return {"exit_code": ERROR, "errors": [str(refused)], "usage_error": str(refused)}
    names = [n.name for n in chosen]
    left_out = selection.left_out(cluster, chosen)
    with (
        tempfile.TemporaryDirectory(prefix="halo-drift-") as folder,
        reach.meanwhile(cluster, set(names)) as probed,
    ):
        events = Path(folder) / "events.jsonl"
        result = dry_run(config, events, entry, names if left_out else ())
        summary = summarize(names, result, _read_events(events))
        down = {n for n, e in summary["nodes"].items() if e["status"] == UNREACHABLE}
        for node in list(down):
            if transport.reason(summary["nodes"][node]["reason"])[0] != transport.UNREACHABLE:
                # pyinfra's line names the cause (a timeout): ssh's is not needed
                summary["nodes"][node]["reason"] = transport.why(summary["nodes"][node]["reason"])
                down.discard(node)
        for node, why in probed(down).items():
            summary["nodes"][node]["reason"] = why
    summary["errors"] = _errors(summary)
    return summary | {
        "config_errors": [],
        "next_deploy": next_deploy(cluster),
        "left_out": left_out,
    }


def main(argv: list[str], entry: Path) -> int:
    parser = options.parser("halo-cluster drift", __doc__, ERROR)
    parser.value("--json-out", "PATH", "default: the state folder's reports/", rule=file_path)
    parser.value("--md-out", "PATH", "default: beside --json-out, as .md", rule=file_path)
    parser.flag("--json", "the summary as JSON on stdout instead of text")
    selection.add(parser)
    args = parser.parse_args(argv)
    for option, given in (("--json-out", args.json_out), ("--md-out", args.md_out)):
        if given and given != os.devnull and (wrong := state.unwritable(given)):
            parser.refuse(f"{option} {wrong}")  # before the dry run, not a traceback after it
    path = config()
    summary = run(path, entry, args.limit, args.exclude)
    if "usage_error" in summary:
        print(f"{parser.prog}: {summary['usage_error']}", file=sys.stderr)
        return ERROR
    if summary.get("left_out"):
        print(selection.left_out_line(parser.prog, summary["left_out"]), file=sys.stderr)
    summary["config"] = path
    summary["error"] = "\n".join(summary.get("config_errors", [])) or None
    if args.json:
        jsonout.emit("drift", summary)
    elif summary.get("config_errors"):
        print("\n".join(f"drift: error: {e}" for e in summary["config_errors"]))
    else:
        print(report(summary))
    out = Path(args.json_out or reports() / "drift.json")
    # no cluster.yml where it was looked for: no state folder is made beside it for the report
    unread = not args.json_out and not Path(path).is_file()
    if str(out) != os.devnull and not unread:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(jsonout.whole("drift", summary), indent=2) + "\n")
        Path(args.md_out or out.with_suffix(".md")).write_text(markdown(summary))
    return summary["exit_code"]


if __name__ == "__main__":  # as `halo-cluster drift`, which finds deploy.py or says where not
    from halo_cluster.tools import cli

    sys.exit(cli.main(["drift", *sys.argv[1:]]))
