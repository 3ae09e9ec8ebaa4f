"""Valid but unusual values reach every planned command as whole shell words, and no value the
rules refuse reaches a plan at all."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from halo_cluster.config.loader import ConfigError
from tests.plan.harness import plan
from tests.plan.nodes import cluster, fresh_node, strix_halo_hardware

UNUSUAL = {
    "cluster_user": "ai-user2",
    "toolbox": "vllm.tb_1-0",
    "image": "localhost:5000/team/vllm_img:v1.2-rc",
}


def unusual_plan():
    extra = "".join(f"{key}: {value}\n" for key, value in UNUSUAL.items() if key != "cluster_user")
    config = cluster(extra, user=UNUSUAL["cluster_user"])
    node = fresh_node(hardware=strix_halo_hardware())
    return plan(config, {"halo1": node, "halo2": node})


def test_unusual_values_stay_whole_words_in_every_command() -> None:
    result = unusual_plan()
    commands = result.commands("halo1") + result.commands("halo2")
    for value in UNUSUAL.values():
        using = [c for c in commands if value in c]
        assert using, f"{value} is in no planned command"
        for command in using:
            words = shlex.split(command.replace("FunctionCommand(", "").replace("),", ") "))
            # as many whole occurrences in the shell's words as in the text: none was split
            assert sum(word.count(value) for word in words) == command.count(value), command


def test_every_planned_command_parses_as_shell() -> None:
    result = unusual_plan()
    for command in result.commands("halo1"):
        if command.startswith("FunctionCommand("):
            continue
        check = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
        assert check.returncode == 0, f"{command}: {check.stderr}"


@pytest.mark.parametrize(
    ("key", "value"),
    [("cluster_user", '"vllm$(touch /tmp/x)"'), ("toolbox", "../../etc/x"), ("image", "'x; y'")],
)
def test_hostile_values_never_reach_a_plan(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        if key == "cluster_user":
            cluster(user=value)
        else:
            cluster(f"{key}: {value}\n")
    assert f": {key}: " in refused.value.problems[0]
