"""Every field of every `--json` document, declared once: docs/ci.md's table is `table()`'s
(tests/unit/test_docs.py compares them), and the commands' tests (test_down_node.py,
test_bench.py, test_status.py, test_drift_images.py, test_recipes.py) check each command's real
documents against `problems`.

A field's path names it inside the document: `nodes[].name` is the `name` of each item of the
list `nodes`, `nodes{}.status` the `status` of each value of the object `nodes` (keyed by node
name). A type is `int`, `number`, `str`, `bool`, `object` (its keys not declared further unless
its children are), `list[str]`, `list[object]`, or several joined by `|`; `null` is a value
that could not be known (a node not reached, a lock not read), never a word in its place.
Every declared field is present in every document but an error document, which holds only
COMMON's (`error` set): a usage error, a bad or missing config, an option refused. A field
whose type changes, or that goes, raises jsonout.VERSION.
"""

from __future__ import annotations

from typing import Any

Field = tuple[str, str, str]  # (path, type, meaning)

COMMON: tuple[Field, ...] = (
    ("version", "int", "the schema's version (this table's); raised when a field changes type"),
    ("command", "str", "the command that wrote it: status, where, verify, bench, drift, upgrade"),
    ("exit_code", "int", "the command's exit code (the table above)"),
    (
        "error",
        "str|null",
        "why the command stopped before its work (its lines on stderr: a bad or missing "
        "config, a usage error) or measured nothing; null when it did its work",
    ),
)

_NODE_STATUS: tuple[Field, ...] = (
    ("nodes[].name", "str", "the node's name in cluster.yml"),
    ("nodes[].role", "str", "head or worker"),
    ("nodes[].address", "str", "its data-link address"),
    ("nodes[].reachable", "bool", "whether its read over SSH answered"),
    ("nodes[].unreachable", "str", "the one line saying why it cannot be reached, else empty"),
    ("nodes[].ray", "str", "alive, dead, absent (not among Ray's nodes) or unknown (not read)"),
    ("nodes[].gpus", "number|null", "the GPUs Ray counts on it; null when not read"),
    ("nodes[].units", "list[object]|null", "its services; null when not reached"),
    ("nodes[].units[].name", "str", "the unit: halo-ray, halo-vllm"),
    ("nodes[].units[].state", "str", "systemd's ActiveState, absent, or unknown (no answer)"),
    ("nodes[].units[].restarts", "int", "systemd's NRestarts"),
    ("nodes[].units[].since", "str", "when it entered its state, as systemd says it"),
    ("nodes[].units[].error", "str", "the last journal line of a failed unit, else empty"),
    ("nodes[].vllm", "object|null", "the head's: health (HTTP code), models, url (and world)"),
    ("nodes[].memory", "object|null", "its memory budget (decide/budget.py's fields)"),
    ("nodes[].versions", "object|null", "its running and installed kernel and firmware"),
    ("nodes[].images", "object|null", "container name: the image reference it runs"),
    ("nodes[].rank", "object", "serve.launcher native: its rank in the world, else empty"),
    ("nodes[].live", "object|null", "the head's Prometheus numbers of the last 5 minutes"),
    ("nodes[].watchdog", "object|null", "the head's stall watchdog: state, last restart"),
    ("nodes[].warmup", "object|null", "the head's last warm-up of each model: ok, seconds"),
    ("nodes[].silent", "list[str]", "the parts of its read stopped unanswered"),
)

FIELDS: dict[str, tuple[Field, ...]] = {
    "status": (
        ("serving", "bool", "serve.enabled: false reads only each node's reach, image, versions"),
        ("reason", "str|null", "why nothing serves (serve.enabled false); null when serving"),
        ("nodes", "list[object]", "each node read (not those left out)"),
        *_NODE_STATUS,
        ("left_out", "list[str]", "the nodes --limit and --exclude left out"),
    ),
    "where": (
        ("next_deploy", "str|null", "what the next deploy would record, else null"),
        ("serving", "bool", "serve.enabled"),
        ("reason", "str|null", "why nothing serves; null when serving"),
        ("head", "str", "the head's name"),
        ("model", "str|null", "the served model's name; null when not serving"),
        ("url", "str|null", "vLLM's URL; null when not serving"),
        ("listen", "str|null", "serve.listen: data or all; null when not serving"),
        ("try", "str|null", "one curl line that works from here; null when not serving"),
        ("status", "str|null", "the status command for this config; null when not serving"),
    ),
    "models": (
        ("nodes", "int", "the config's node count"),
        ("in_use", "str|null", "the config's serve.recipe; null when it names none"),
        ("recipes", "list[object]", "every recipe, the user's in place of a shipped one"),
        ("recipes[].name", "str", "its name, as serve.recipe names it"),
        ("recipes[].summary", "str", "what the model is, in one line"),
        ("recipes[].model", "str", "its serve.model: the hub id"),
        ("recipes[].revision", "str", "the hub revision its flags were published for: main"),
        ("recipes[].tensor_parallel_size", "int", "its TP"),
        ("recipes[].pipeline_parallel_size", "int", "its PP"),
        ("recipes[].nodes", "int", "the nodes it needs: TP x PP, one GPU each"),
        ("recipes[].file", "str", "its file"),
        ("recipes[].shipped", "bool", "shipped with the tool; false: the user's own"),
        ("recipes[].fits", "bool", "this cluster has the nodes it needs"),
        ("recipes[].why", "str|null", "why not, in one line; null when it fits"),
    ),
    "verify": (
        ("config", "str", "the cluster.yml verified"),
        ("counts", "object", "the checks' outcomes, counted"),
        ("counts.passed", "int", "checks passed"),
        ("counts.FAILED", "int", "checks failed (a node not reached is one: `reached`)"),
        ("counts.NOT VERIFIED", "int", "checks of hardware this machine cannot have"),
        ("counts.WARN", "int", "checks that report a risk and still pass the run"),
        ("nodes", "object", "node name: what was found of it (not those left out)"),
        ("nodes{}.reachable", "bool", "whether it answered the probe before the checks"),
        ("nodes{}.reason", "str|null", "the one line saying why it cannot be reached"),
        ("nodes{}.checks", "object|null", "its checks' counts, as `counts`; null: not reached"),
        ("nodes{}.checks.passed", "int", "as counts.passed"),
        ("nodes{}.checks.FAILED", "int", "as counts.FAILED"),
        ("nodes{}.checks.NOT VERIFIED", "int", "as counts.NOT VERIFIED"),
        ("nodes{}.checks.WARN", "int", "as counts.WARN"),
        ("left_out", "list[str]", "the nodes --limit and --exclude left out"),
        ("checks", "list[object]", "every check run, by node then name"),
        ("checks[].where", "str", "the node (or pair, or cluster) it checked"),
        ("checks[].check", "str", "its name"),
        ("checks[].status", "str", "passed, FAILED, NOT VERIFIED, WARN or skipped"),
        ("checks[].detail", "str", "what it measured, or why it failed"),
    ),
    "bench": (
        ("verdict", "str|null", "baseline, within or regression; null when nothing was measured"),
        ("levels", "object|null", "concurrency: its measures; null when nothing was measured"),
        ("run", "object|null", "the run's line of reports/bench/index.jsonl"),
        ("compared_to", "object|null", "the previous run's line, null for a baseline"),
        ("changed", "list[str]", "the run key's fields that differ from the previous run's"),
        ("regressions", "list[str]", "why a regression, one per level and measure"),
        ("deltas", "object", "concurrency: measure: its change from the previous run"),
        ("chart", "str|null", "the chart.svg written; null with --compare or no run"),
        ("nodes", "object", "node name: whether it was read, when a node could not be"),
        ("nodes{}.reachable", "bool", "whether its read answered"),
        ("nodes{}.reason", "str|null", "the one line saying why it cannot be reached"),
    ),
    "drift": (
        ("config", "str", "the cluster.yml planned"),
        ("errors", "list[str]", "one line per node in error, or per config problem"),
        ("config_errors", "list[str]", "the config's problems (no node is planned then)"),
        ("nodes", "object", "node name: what a deploy would do there"),
        ("nodes{}.status", "str", "converged, drift, refused, unreachable or failed"),
        ("nodes{}.reason", "str|null", "why refused, unreachable or failed; else null"),
        ("nodes{}.changes", "list[str]|null", "the operations that would change; null: unreached"),
        ("nodes{}.files", "object|null", "path: its diff's lines; null when not reached"),
        ("nodes{}.images", "list[str]|null", "containers not running the cluster's image"),
        ("next_deploy", "str|null", "what the next deploy would record, else null"),
        ("left_out", "list[str]", "the nodes --limit and --exclude left out"),
    ),
    "upgrade": (
        ("result", "str", "what the exit code means (the table above)"),
        ("digest", "str|null", "the lock's build after the run; null when the lock was not read"),
        ("previous", "str|null", "the lock's previous build, null when none or not read"),
        ("trial", "bool|null", "switched to but not gated yet; null when the lock was not read"),
        ("unreachable", "object|null", "node name: why it cannot be reached; null: not probed"),
    ),
}

_TYPES = {"int": int, "number": (int, float), "str": str, "bool": bool, "object": dict,
          "list[str]": list, "list[object]": list, "null": type(None)}  # fmt: skip


def fields(command: str) -> tuple[Field, ...]:
    return (*COMMON, *FIELDS[command])


def _fits(value: Any, kind: str) -> bool:
    for one in kind.split("|"):
        if isinstance(value, bool) and one in ("int", "number"):
            continue  # JSON's true is no number
        if isinstance(value, _TYPES[one]) and (
            one != "list[str]" or all(isinstance(item, str) for item in value)
        ):
            return True
    return False


def problems(command: str, document: dict) -> list[str]:
    """What in DOCUMENT is not as COMMAND's fields declare it: a field not declared, one
    missing, a value of another type; [] when it is."""
    declared = {path: kind for path, kind, _ in fields(command)}
    if set(document) == {name for name, _, _ in COMMON}:  # an error document
        declared = {path: kind for path, kind, _ in COMMON}
        if not isinstance(document.get("error"), str):
            return ["an error document without its error"]
    return _walk(declared, document, "")


def _walk(declared: dict[str, str], found: dict, at: str) -> list[str]:
    wrong = []
    children = {p for p in declared if _parent(p) == at}
    for path in sorted(children - {_join(at, key) for key in found}):
        wrong.append(f"{path}: missing")
    for key, value in found.items():
        path = _join(at, key)
        if path not in declared:
            wrong.append(f"{path}: not declared")
        elif not _fits(value, declared[path]):
            wrong.append(f"{path}: {type(value).__name__}, not {declared[path]}")
        elif isinstance(value, dict) and any(_parent(p) == path for p in declared):
            wrong += _walk(declared, value, path)
        elif isinstance(value, dict) and any(_parent(p) == path + "{}" for p in declared):
            wrong += [w for item in value.values() for w in _walk(declared, item, path + "{}")]
        elif isinstance(value, list) and any(_parent(p) == path + "[]" for p in declared):
            wrong += [w for item in value for w in _walk(declared, item, path + "[]")]
    return wrong


def _join(at: str, key: str) -> str:
    return f"{at}.{key}" if at else key


def _parent(path: str) -> str:
    """`nodes[].units[].name` -> `nodes[].units[]`; a top-level field's parent is ""."""
    return path.rpartition(".")[0]


def table() -> str:
    """docs/ci.md's table of every --json document's fields."""
    rows = ["| command | field | type | meaning |", "|---|---|---|---|"]
    rows += [f"| every | `{p}` | {k.replace('|', ' or ')} | {m} |" for p, k, m in COMMON]
    rows += [
        f"| {command} | `{path}` | {kind.replace('|', ' or ')} | {meaning} |"
        for command, declared in FIELDS.items()
        for path, kind, meaning in declared
    ]
    return "\n".join(rows)
