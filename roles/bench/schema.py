"""The bench role's keys: the seeded workload of `halo-cluster bench`, its tolerance and the
upgrade gate's switch, and their check across keys (`Bench`, `cluster.bench`)."""

from __future__ import annotations

from pathlib import Path

from halo_cluster.config import rules
from halo_cluster.config.model import Cluster, Problems
from halo_cluster.config.rules import quote
from halo_cluster.config.schema import Field, section_type, variables


def _count(value: object) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return None if ok else f"{quote(value)} is not a count (0 or more)"


def _percent(value: object) -> str | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 100
    return None if ok else f"{quote(value)} is outside 0-100 %"


SECTION: tuple[Field, ...] = (
    Field(
        "bench",
        "mapping",
        {},
        "The benchmark `halo-cluster bench` runs with the image's own `vllm bench serve` "
        "(see `bench.*` and docs/bench.md).",
    ),
    Field(
        "bench.input_len",
        "integer",
        1024,
        "Prompt tokens per request (`--random-input-len`, vLLM's own default).",
        rule=rules.positive,
    ),
    Field(
        "bench.output_len",
        "integer",
        128,
        "Output tokens per request (`--random-output-len`, vLLM's default; the random dataset "
        "ignores EOS, so every request generates exactly this many).",
        rule=rules.positive,
    ),
    Field(
        "bench.num_prompts",
        "integer",
        40,
        "Requests per concurrency level (`--num-prompts`): five rounds of the default loaded "
        "level.",
        rule=rules.positive,
    ),
    Field(
        "bench.concurrency",
        "list of integers",
        [1, 8],
        "Concurrency levels (`--max-concurrency`), one run each: at least two, ascending, each "
        "at most `bench.num_prompts`; 1 measures latency, the loaded one throughput.",
        rule=rules.positive,
    ),
    Field("bench.seed", "integer", 0, "`--seed` of the random prompts (vLLM's default)."),
    Field(
        "bench.warmups",
        "integer",
        3,
        "Warm-up requests before each level, not counted; at least the level's concurrency is "
        "sent (`--num-warmups max(this, C)`), so that the warm-up reaches the level's batch size.",
        rule=_count,
    ),
    Field(
        "bench.tolerance",
        "number",
        10,
        "Percent output tokens/s may fall at a level, against the previous run of the same "
        "configuration, before it is a regression (exit 3): 0-100.",
        rule=_percent,
    ),
    Field(
        "bench.gate",
        "boolean",
        True,
        "The image upgrade runs the bench as part of its gate when a baseline exists (false: "
        "skipped, for an upgrade to a build known to be slower).",
    ),
    Field(
        "bench.timeout",
        "integer",
        3600,
        "Seconds one concurrency level may take before the run fails; the client is stopped "
        "in the container then (`timeout`).",
        rule=rules.positive,
    ),
)
READS: tuple[str, ...] = ()
VARIABLES = variables(SECTION, READS)

# the section as typed values, one field per key below `bench` (`cluster.bench`)
Bench = section_type("Bench", SECTION)


def derive(cluster: Cluster, problems: Problems, base_dir: Path) -> Bench:
    values = {name: cluster.settings[f"bench.{name}"] for name in Bench.__dataclass_fields__}
    bench = Bench(**{**values, "concurrency": tuple(values["concurrency"])})
    levels = bench.concurrency
    if len(levels) < 2 or list(levels) != sorted(set(levels)):
        problems.error(
            "bench.concurrency",
            f"{list(levels)}: give at least two levels, ascending, each once (1 and a loaded one)",
        )
    elif levels[-1] > bench.num_prompts:
        problems.error(
            "bench.concurrency",
            f"{levels[-1]} is more than bench.num_prompts ({bench.num_prompts}): that level "
            "would never run that many requests at once",
        )
    return bench
