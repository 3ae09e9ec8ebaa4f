"""Every `bench.*` key has its rule: each bound refused one past it in one line naming the key,
and taken at it; `bench.seed` within what `vllm bench serve` seeds numpy's np.random.seed with
(0 to 2**32 - 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from halo_cluster import roles
from halo_cluster.config.loader import load_cluster
from halo_cluster.roles.bench import schema
from tests.unit.configs import VALID_ROCE, problems, write

# (key, the lowest value taken, the highest, what a refusal says after the value)
BOUNDS = [
    ("seed", 0, 2**32 - 1, "is outside 0-4294967295: vllm bench serve seeds numpy's"),
    ("input_len", 1, 2**20, "is outside 1-1048576 tokens"),
    ("output_len", 1, 2**20, "is outside 1-1048576 tokens"),
    ("num_prompts", 1, 100_000, "is outside 1-100000"),
    ("warmups", 0, 100_000, "is outside 0-100000"),
    ("timeout", 1, 7 * 86400, "is outside 1-604800 seconds (a week)"),
    ("tolerance", 0, 100, "is outside 0-100 %"),
    ("gate_runs", 2, 10, "is outside 2-10 runs of each build"),
]


def bench(section: str) -> str:
    return VALID_ROCE + f"bench: {{{section}}}\n"


def one(key: str, value: int) -> str:
    """The bench section with `key` at `value`, the levels within bench.num_prompts (the two
    levels it needs make 2 the least bench.num_prompts that loads)."""
    return bench(f"{key}: {value}, concurrency: [1, 2]")


@pytest.mark.parametrize(("key", "low", "high", "said"), BOUNDS)
def test_one_past_each_bound_is_refused_naming_the_key(
    tmp_path: Path, key: str, low: int, high: int, said: str
) -> None:
    for value in (low - 1, high + 1):
        found = problems(tmp_path, one(key, value))
        assert any(f"bench.{key}: {value} {said}" in p for p in found), found
        assert all("\n" not in p for p in found), found


@pytest.mark.parametrize(("key", "low", "high", "said"), BOUNDS)
def test_each_bound_itself_is_taken(
    tmp_path: Path, key: str, low: int, high: int, said: str
) -> None:
    for value in (max(low, 2) if key == "num_prompts" else low, high):
        cluster = load_cluster(write(tmp_path, one(key, value)))
        assert getattr(cluster.bench, key) == value


def test_the_seed_vllm_cannot_take_is_refused(tmp_path: Path) -> None:
    """-1 and 2**32 passed and failed every level inside the container (numpy's ValueError)."""
    for value in (-1, 4294967296):
        assert problems(tmp_path, bench(f"seed: {value}")) == [
            f"{tmp_path / 'cluster.yml'}: bench.seed: {value} is outside 0-4294967295: vllm bench "
            "serve seeds numpy's np.random.seed, which takes no other seed"
        ]
    for value in (0, 4294967295):
        assert load_cluster(write(tmp_path, bench(f"seed: {value}"))).bench.seed == value


@pytest.mark.parametrize(
    ("section", "line"),
    [
        ("concurrency: [0, 8]", "bench.concurrency[0]: 0 is outside 1-100000"),
        ("concurrency: [1, 100001]", "bench.concurrency[1]: 100001 is outside 1-100000"),
        ("tolerance: .nan", "bench.tolerance: nan is outside 0-100 %"),
        ("tolerance: .inf", "bench.tolerance: inf is outside 0-100 %"),
        ("seed: 1.5", "bench.seed: expected integer, got number 1.5"),
        ("seed: true", "bench.seed: expected integer, got boolean"),
        ("gate: 'yes'", "bench.gate: expected boolean, got string 'yes'"),
    ],
)
def test_the_other_refusals(tmp_path: Path, section: str, line: str) -> None:
    found = problems(tmp_path, bench(section))
    assert any(line in p for p in found), found


def test_every_bench_key_has_a_rule() -> None:
    """A number has its bounds, a word its choices: only the mapping and the boolean go without
    (their type is the whole rule)."""
    for field in schema.SECTION:
        if field.type not in ("mapping", "boolean"):
            assert field.rule or field.choices, field.path
    assert {f.path for f in schema.SECTION} == {
        f.path for f in roles.schema().fields if f.path.startswith("bench")
    }
