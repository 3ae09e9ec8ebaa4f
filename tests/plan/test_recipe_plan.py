"""A model recipe deployed (`serve.recipe`, docs/models.md): the planned `vllm serve` line holds
the recipe's flags where cluster.yml wrote none, the user's keys where it did, and a user's own
recipe beside the config in place of a shipped one."""

from __future__ import annotations

from pathlib import Path

from tests.plan.nodes import CONFIG, plan_cluster, serve_cluster


def vllm_line(cluster) -> str:
    script = plan_cluster(cluster).uploads("halo1")[f"{CONFIG}/vllm-start.sh"]
    return next(line for line in script.splitlines() if line.startswith("exec vllm serve "))


def test_a_recipe_plans_its_flags_and_the_users_keys_win() -> None:
    # SERVE writes model Qwen/Qwen3-14B and max_model_len 8192: those are the user's and win
    line = vllm_line(serve_cluster(serve=", recipe: gpt-oss-120b-tp2"))
    assert line == (
        "exec vllm serve Qwen/Qwen3-14B --host=192.168.100.1 --port=8000 "
        "--served-model-name=Qwen/Qwen3-14B --tensor-parallel-size=2 --pipeline-parallel-size=1 "
        "--distributed-executor-backend=ray --gpu-memory-utilization=0.9 --max-model-len=8192 "
        "--enforce-eager --dtype=auto --attention-backend=TRITON_ATTN --trust-remote-code"
    )


def test_the_users_own_recipe_is_planned_in_place_of_a_shipped_one(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "gpt-oss-120b-tp2.yml").write_text(
        "serve:\n  model: org/mine\n  tensor_parallel_size: 2\n  max_num_seqs: 4\n"
        "  enforce_eager: false\n  extra_args: [--dtype=bfloat16]\n"
    )
    line = vllm_line(serve_cluster(serve=", recipe: gpt-oss-120b-tp2", tmp_path=tmp_path))
    assert line.endswith("--max-model-len=8192 --max-num-seqs=4 --dtype=bfloat16"), line
    assert "--enforce-eager" not in line and "TRITON_ATTN" not in line
