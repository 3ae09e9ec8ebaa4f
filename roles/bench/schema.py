"""The bench role's keys: the seeded workload of `halo-cluster bench`, its tolerance and the
upgrade gate's switch, and their check across keys (`Bench`, `cluster.bench`)."""

from __future__ import annotations

from pathlib import Path

from halo_cluster.config import rules
from halo_cluster.config.model import Cluster, Problems
from halo_cluster.config.quoting import quote
from halo_cluster.config.schema import Field, section_type, variables

# The workload's bounds: a few digits too many are refused here, not after a level that cannot
# finish. A prompt or an output beyond 2**20 tokens is beyond any context a node serves.
MAX_TOKENS = 2**20
MAX_PROMPTS = 100_000  # per level, warm-ups and concurrency alike
MAX_TIMEOUT = 7 * 86400  # seconds: a week
# `vllm bench serve --seed` seeds Python's random.seed and numpy's legacy np.random.seed
# (vllm/benchmarks/serve.py, main_async); numpy's MT19937 seed is 0 to 2**32 - 1, anything else
# a ValueError (numpy/random/_mt19937.pyx, _legacy_seeding): every level would fail with it
MAX_SEED = 2**32 - 1
# the upgrade gate's runs of each build: two at least, for a spread; each is a whole run of every
# level, twice (the build being left and the new one), so the gate's time grows with it
MAX_GATE_RUNS = 10

tokens = rules.between(1, MAX_TOKENS, " tokens")
prompts = rules.between(1, MAX_PROMPTS)
warmups = rules.between(0, MAX_PROMPTS)
seed = rules.between(
    0, MAX_SEED, ": vllm bench serve seeds numpy's np.random.seed, which takes no other seed"
)
timeout = rules.between(1, MAX_TIMEOUT, " seconds (a week)")
gate_runs = rules.between(2, MAX_GATE_RUNS, " runs of each build")


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
        f"Prompt tokens per request (`--random-input-len`, vLLM's own default): 1-{MAX_TOKENS}, "
        "and within the model's context with `bench.output_len`.",
        rule=tokens,
    ),
    Field(
        "bench.output_len",
        "integer",
        128,
        "Output tokens per request (`--random-output-len`, vLLM's default; the random dataset "
        f"ignores EOS, so every request generates exactly this many): 1-{MAX_TOKENS}.",
        rule=tokens,
    ),
    Field(
        "bench.num_prompts",
        "integer",
        40,
        "Requests per concurrency level (`--num-prompts`): five rounds of the default loaded "
        f"level; 1-{MAX_PROMPTS}.",
        rule=prompts,
    ),
    Field(
        "bench.concurrency",
        "list of integers",
        [1, 8],
        "Concurrency levels (`--max-concurrency`), one run each: at least two, ascending, each "
        "at most `bench.num_prompts`; 1 measures latency, the loaded one throughput.",
        rule=prompts,
    ),
    Field(
        "bench.seed",
        "integer",
        0,
        f"`--seed` of the random prompts (vLLM's default): 0-{MAX_SEED}, the seeds numpy's "
        "`np.random.seed` takes (vLLM seeds it with this).",
        rule=seed,
    ),
    Field(
        "bench.warmups",
        "integer",
        3,
        "Warm-up requests before each level, not counted; at least the level's concurrency is "
        "sent (`--num-warmups max(this, C)`), so that the warm-up reaches the level's batch size; "
        f"0-{MAX_PROMPTS}.",
        rule=warmups,
    ),
    Field(
        "bench.tolerance",
        "number",
        10,
        "Percent output tokens/s may fall at a level, against the previous run of the same "
        "configuration, before it is a regression (exit 3; in the upgrade's gate, beyond the "
        "runs' spread too): 0-100.",
        rule=_percent,
    ),
    Field(
        "bench.gate",
        "boolean",
        True,
        "The image upgrade's gate benches the build being left and the new one (false: "
        "skipped, for an upgrade to a build known to be slower).",
    ),
    Field(
        "bench.gate_runs",
        "integer",
        3,
        "Runs of each build the upgrade's gate takes, the build being left just before the "
        "switch and the new one just after: the new one fails only when slower by more than "
        f"both `bench.tolerance` and the runs' spread (docs/bench.md); 2-{MAX_GATE_RUNS}.",
        rule=gate_runs,
    ),
    Field(
        "bench.timeout",
        "integer",
        3600,
        "Seconds one concurrency level may take before the run fails; the client is stopped "
        f"in the container then (`timeout`): 1-{MAX_TIMEOUT} (a week).",
        rule=timeout,
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
