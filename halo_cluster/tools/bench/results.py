"""What `halo-cluster bench` keeps and decides from its results (docs/bench.md), without a
cluster: what a run is keyed by (`config_id`, `key_id`), each level's numbers out of vLLM's
result, the comparison of two runs of one configuration and its verdict, the upgrade gate's
comparison of two builds' repeated runs, report.md, and which of the tool's flags an image's
`vllm bench serve --help=all` lacks. Plain values in and out; beside
the tool, as only the tool uses them (tests/unit/test_layers.py keeps decide/ for shared ones)."""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

BASELINE, WITHIN, REGRESSION = "baseline", "within", "regression"
# what a level is summed up by, in vLLM's own result field names; the table's headings
METRICS: dict[str, str] = {
    "request_throughput": "req/s",
    "output_throughput": "out tok/s",
    "total_token_throughput": "total tok/s",
    "median_ttft_ms": "TTFT med ms",
    "p99_ttft_ms": "TTFT p99 ms",
    "median_tpot_ms": "TPOT med ms",
    "p99_tpot_ms": "TPOT p99 ms",
    "failed": "failed",
}
# the key's fields that may change between runs of one configuration: what a comparison is for
VARYING = ("image_digest", "kernel", "firmware")
FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")


def _hash(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def configuration(key: dict) -> dict:
    """The key without what a comparison is meant to compare: the image digest, and each
    node's kernel and firmware (the node names stay: another cluster is another config)."""
    nodes = {
        name: {k: v for k, v in node.items() if k not in VARYING}
        for name, node in key.get("nodes", {}).items()
    }
    return {**{k: v for k, v in key.items() if k not in VARYING}, "nodes": nodes}


def config_id(key: dict) -> str:
    """What must match for two runs to compare: 12 hex of sha256 over the canonical JSON of
    `configuration(key)`."""
    return _hash(configuration(key))


def key_id(key: dict) -> str:
    """The same hash over the whole key: one per image, kernels and firmware of a config."""
    return _hash(key)


def level(result: dict) -> dict[str, float]:
    """One level's numbers out of vLLM's result JSON, unchanged."""
    return {name: result.get(name) for name in METRICS}


def flattened(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested key as `a.b.c: value` lines, for saying what changed."""
    if not isinstance(value, dict):
        return {prefix: value}
    found: dict[str, Any] = {}
    for name, item in value.items():
        found.update(flattened(item, f"{prefix}.{name}" if prefix else name))
    return found


def changes(previous: dict, latest: dict) -> list[str]:
    """The key's fields that differ between two runs, `path: old -> new`."""
    old, new = flattened(previous), flattened(latest)
    return [
        f"{path}: {old.get(path, 'absent')} -> {new.get(path, 'absent')}"
        for path in sorted(set(old) | set(new))
        if old.get(path) != new.get(path)
    ]


def delta(old: float | None, new: float | None) -> float | None:
    """The change in percent of `old`; None when either is missing or `old` is 0."""
    if old is None or new is None or not old:
        return None
    return (new - old) / old * 100


@dataclass(frozen=True)
class Comparison:
    verdict: str  # baseline, within, regression
    reasons: tuple[str, ...] = ()  # why a regression, one per level and metric
    deltas: dict[str, dict[str, float | None]] = field(default_factory=dict)  # level -> metric
    changed: tuple[str, ...] = ()  # the key's fields that differ

    @property
    def exit_code(self) -> int:
        return 3 if self.verdict == REGRESSION else 0


def compare(latest: dict, previous: dict | None, tolerance: float) -> Comparison:
    """`latest` against `previous` (index lines of one config_id): a regression when output
    tokens/s fell by more than `tolerance` percent at a level, or failed requests rose."""
    if previous is None:
        return Comparison(BASELINE)
    deltas, reasons = {}, []
    for name, now in latest["levels"].items():
        before = previous["levels"].get(name)
        if before is None:
            continue
        deltas[name] = {m: delta(before[m], now[m]) for m in METRICS if m != "failed"}
        fell = deltas[name]["output_throughput"]
        if fell is not None and fell < -tolerance:
            reasons.append(
                f"concurrency {name}: output tok/s fell {-fell:.1f} % "
                f"({before['output_throughput']:.2f} -> {now['output_throughput']:.2f}; "
                f"tolerance {tolerance:g} %)"
            )
        if (now["failed"] or 0) > (before["failed"] or 0):
            reasons.append(
                f"concurrency {name}: failed requests rose {before['failed']} -> {now['failed']}"
            )
    verdict = REGRESSION if reasons else WITHIN
    changed = tuple(changes(previous["key"], latest["key"]))
    return Comparison(verdict, tuple(reasons), deltas, changed)


def comparable(line: dict, config: str) -> bool:
    """A run of `config` that may be compared with: not a regression, or a second slow run
    would compare with the first and pass, and a cluster could grow slower run by run."""
    return line["config_id"] == config and line.get("verdict") != REGRESSION


def previous_of(lines: list[dict], latest: dict) -> dict | None:
    """The index line before `latest` with its config_id, regressions skipped."""
    earlier = lines[: lines.index(latest)] if latest in lines else lines
    return next((x for x in reversed(earlier) if comparable(x, latest["config_id"])), None)


def missing_flags(help_text: str, flags: list[str]) -> list[str]:
    """The flags (`--name`) `help_text` does not list."""
    listed = set(FLAG.findall(help_text))
    return [flag for flag in flags if flag not in listed]


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f} %"


def level_table(levels: dict[str, dict], deltas: dict[str, dict] | None = None) -> list[str]:
    """The end of a run: one row per level, each metric, and its change when compared."""
    rows = [("concurrency", *METRICS.values())]
    for name, numbers in levels.items():
        rows.append((name, *(_cell(numbers[m]) if m != "failed" else str(numbers[m])
                             for m in METRICS)))  # fmt: skip
        if deltas and name in deltas:
            rows.append(("  change", *(_signed(deltas[name].get(m)) if m != "failed" else ""
                                       for m in METRICS)))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]


def report(lines: list[dict]) -> str:
    """report.md: the history of the latest run's configuration, one row per run, oldest first,
    with the change of output tokens/s from the row before and the run's verdict."""
    if not lines:
        return "# Benchmark history\n\nNo runs yet: `halo-cluster bench`.\n"
    latest = lines[-1]
    mine = [x for x in lines if x["config_id"] == latest["config_id"]]
    names = list(latest["levels"])
    head = ["date", "image", "vLLM", "kernel", "firmware"]
    head += [f"out tok/s c{n}" for n in names] + [f"TTFT p99 c{names[-1]}", "failed", "Δ %"]
    rows = ["| " + " | ".join([*head, "verdict"]) + " |", "|" + "---|" * (len(head) + 1)]
    before = None
    for run in mine:
        out = [run["levels"].get(n, {}).get("output_throughput") for n in names]
        change = [
            delta(before["levels"].get(n, {}).get("output_throughput"), o) if before else None
            for n, o in zip(names, out, strict=True)
        ]
        failed = sum(run["levels"][n]["failed"] or 0 for n in run["levels"])
        cells = [run["date"], run["image_digest"].removeprefix("sha256:")[:12], run["vllm"],
                 run["kernel"], run["firmware"], *map(_cell, out),
                 _cell(run["levels"].get(names[-1], {}).get("p99_ttft_ms")), str(failed),
                 " / ".join(map(_signed, change)), run["verdict"] or "-"]  # fmt: skip
        rows.append("| " + " | ".join(cells) + " |")
        before = run
    lab = (
        "\n**Lab stand-in, not a model's numbers**: these runs measured the lab's stand-in vLLM "
        "(its HTTP path and a fixed delay per token), never a model on a GPU.\n"
        if latest["lab"]
        else ""
    )
    return (
        f"# Benchmark history of configuration {latest['config_id']}\n\n"
        f"Model {latest['key']['model']} (revision {latest['key']['revision'] or '?'}), "
        f"TP {latest['key']['tensor_parallel_size']} x PP "
        f"{latest['key']['pipeline_parallel_size']}, {latest['key']['transport']}; workload "
        f"`{json.dumps(latest['key']['workload'], sort_keys=True)}`. One row per run, oldest "
        "first; Δ % is output tokens/s against the row before, per level.\n"
        f"{lab}\n" + "\n".join(rows) + "\n"
    )


# ---- the upgrade gate: two builds' runs in one window (gate.py)
MEASURED, FAILED = "measured", "failed"


@dataclass(frozen=True)
class Side:
    """One build's runs for the upgrade gate (their index lines), or why there are none:
    `status` measured, skipped (`bench.gate: false`) or failed (`reason`)."""

    status: str
    reason: str = ""
    lines: tuple[dict, ...] = ()


@dataclass(frozen=True)
class GateResult:
    """The gate's answer: `status` passed, failed, baseline or skipped; `reason` one line when
    not passed; `said`, the gate's line per level."""

    status: str
    reason: str = ""
    said: tuple[str, ...] = ()


def spread(values: list[float]) -> float:
    """How far one build's runs at a level disagree: (max - min) / median, in percent; 0 for
    a side with no request completed in most runs (median 0): nothing to scale by, and its
    median alone judges it (`LevelGate.slower`), never a spread wide enough to pass anything."""
    middle = statistics.median(values)
    if middle <= 0:
        return 0.0
    return (max(values) - min(values)) / middle * 100


@dataclass(frozen=True)
class LevelGate:
    """One level of the gate: both builds' medians of output tokens/s and their change, the
    larger of the two sides' spreads, and failed requests (the new build's fewest in a run,
    the old one's most)."""

    level: str
    new: float
    old: float
    runs: tuple[int, int]  # new, old
    change: float  # percent of `old`
    spread: float
    tolerance: float
    failed: tuple[int, int]

    @property
    def slower(self) -> bool:
        """Slower by more than both the tolerance and the spread: what noise cannot explain; a
        new build whose median is 0 (most of its runs completed no request) always is."""
        return self.new <= 0 or self.change < -max(self.tolerance, self.spread)

    @property
    def failing_more(self) -> bool:
        """Every run of the new build failed more requests than any run of the old one."""
        return self.failed[0] > self.failed[1]

    @property
    def passed(self) -> bool:
        return not (self.slower or self.failing_more)

    def line(self) -> str:
        text = (
            f"concurrency {self.level}: output tokens/s {_amount(self.new)} (new, median of "
            f"{self.runs[0]}) against {_amount(self.old)} (old, median of {self.runs[1]}), "
            f"{self.change:+.1f} %, spread {self.spread:.1f} %, tolerance {self.tolerance:g} %"
        )
        if self.failing_more:
            text += (
                f", failed requests {self.failed[0]} (new, fewest in a run) against "
                f"{self.failed[1]} (old, most in a run)"
            )
        return f"{text}: {'pass' if self.passed else 'fail'}"


def _amount(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def _values(lines: list[dict], level_name: str, metric: str) -> list[float]:
    found = (line["levels"].get(level_name, {}).get(metric) for line in lines)
    return [value for value in found if value is not None]


def gate_levels(old: list[dict], new: list[dict], tolerance: float) -> list[LevelGate]:
    """The old build's runs against the new one's (index lines), level by level: the medians
    of output tokens/s, and the spread of the noisier side."""
    found = []
    for name in new[0]["levels"]:
        before = _values(old, name, "output_throughput")
        after = _values(new, name, "output_throughput")
        if not before or not after:
            continue
        was, now = statistics.median(before), statistics.median(after)
        # an old build that completed nothing: the new one is no slower, unless it did neither
        change = (now - was) / was * 100 if was > 0 else 0.0
        noise = max(spread(before), spread(after))
        failed = (
            min(_values(new, name, "failed") or [0]),
            max(_values(old, name, "failed") or [0]),
        )
        runs = (len(after), len(before))
        found.append(LevelGate(name, now, was, runs, change, noise, tolerance, failed))
    return found


def gate_result(old: list[dict], new: list[dict], tolerance: float) -> GateResult:
    """The gate's verdict: failed when a level is slower than noise and the tolerance explain,
    or fails more requests in every run; each level's line said either way."""
    levels = gate_levels(old, new, tolerance)
    if not levels:
        return GateResult("baseline", "baseline (no level measured on both builds)")
    said = tuple(f"bench gate: {level.line()}" for level in levels)
    failing = [level.line() for level in levels if not level.passed]
    return GateResult(FAILED if failing else "passed", "; ".join(failing), said)
