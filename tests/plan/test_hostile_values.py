"""Values that reach a shell or undo what the tool sets, planned on recorded outputs: a value the
rules refuse never reaches a plan (refused while the config loads, before any host is contacted),
and a name the kernel takes but a shell would run reaches the files a shell reads quoted."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from halo_cluster.config.loader import ConfigError
from tests.plan.harness import plan
from tests.plan.nodes import (
    CONFIG,
    E810,
    KEYFILE,
    LOOPBACK,
    MGMT,
    cluster,
    fresh_node,
    plan_cluster,
    serve_cluster,
)

ENV_FILE = "/etc/halo-cluster/cluster.env"
# a name dev_valid_name takes (9 bytes, no '/', ':' or space): unquoted, a shell creates m and n
HOSTILE_NAME = "e;>m$(>n)"


@pytest.mark.parametrize(
    ("extra", "data", "key"),
    [
        ("kernel: {extra_args: ['ttm.pages_limit=1024']}\n", None, "kernel.extra_args[0]"),
        ("kernel: {remove_args: [amdgpu.gttsize]}\n", None, "kernel.remove_args[0]"),
        ("kernel: {extra_args: ['foo=1', 'foo=2']}\n", None, "kernel.extra_args[1]"),
        (f"image: 'a@sha256:{'A' * 64}'\n", None, "image"),
        ("image: 'docker.io/x/vllm:t\u00e4g'\n", None, "image"),
        (
            "",
            "{interface: \u0430\u0431\u0432\u0433\u0434\u0435\u0436\u0437}",
            "nodes[0].data.interface",
        ),
        ("", '{interface: "e\\0x"}', "nodes[0].data.interface"),
    ],
)
def test_a_refused_value_never_reaches_a_plan(extra: str, data: str | None, key: str) -> None:
    with pytest.raises(ConfigError) as refused:
        cluster(extra, data=data or "{interface: auto}")
    assert f": {key}: " in refused.value.problems[0], refused.value.problems


def hostile_plan():
    c = cluster(data=f'{{interface: "{HOSTILE_NAME}"}}')
    node = fresh_node(interfaces=[LOOPBACK, MGMT, dict(E810, name=HOSTILE_NAME)])
    return plan(c, {"halo1": node, "halo2": node})


@pytest.mark.parametrize("shell", ["/bin/sh", "/bin/bash"])
def test_a_hostile_interface_name_is_one_quoted_word_in_cluster_env(
    shell: str, tmp_path: Path
) -> None:
    result = hostile_plan()
    assert result.refused == {}
    env = result.uploads("halo2")[ENV_FILE]
    assert f"\nNCCL_SOCKET_IFNAME='{HOSTILE_NAME}'\n" in env
    (tmp_path / "cluster.env").write_text(env)
    sourced = subprocess.run(
        [
            shell,
            "-c",
            'set -a; . ./cluster.env; set +a; printf "%s\\0%s" "$NCCL_SOCKET_IFNAME" '
            '"$GLOO_SOCKET_IFNAME"',
        ],
        capture_output=True,
        cwd=tmp_path,
        timeout=10,
    )
    assert sourced.returncode == 0, sourced.stderr
    assert sourced.stdout.decode().split("\0") == [HOSTILE_NAME, HOSTILE_NAME]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.env"]  # no m, no n


def test_the_keyfile_takes_the_name_as_it_is() -> None:
    """NetworkManager's keyfile is no shell: the name is the value of its line, unquoted."""
    keyfile = hostile_plan().uploads("halo1")[KEYFILE]
    assert f"\ninterface-name={HOSTILE_NAME}\n" in keyfile


def test_vllm_serve_gets_each_argument_once_quoted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The role hands vllm-start.sh.j2 its arguments as they are and the template quotes each
    (`sh`): quoted twice, a word needing quotes would reach vLLM with the quotes in it."""
    from halo_cluster.roles.serve import flags

    real = flags.argv
    monkeypatch.setattr(flags, "argv", lambda data: [*real(data), "--x=a b'c", "$(touch m)"])
    vllm = plan_cluster(serve_cluster()).uploads("halo1")[f"{CONFIG}/vllm-start.sh"]
    line = vllm[vllm.index("exec vllm serve") :].replace("exec vllm serve", "printf '%s\\0'")
    for shell in ("/bin/sh", "/bin/bash"):
        done = subprocess.run([shell, "-c", line], capture_output=True, timeout=10)
        assert done.returncode == 0, done.stderr
        got = done.stdout.decode().split("\0")[:-1]
        assert got[0] == "Qwen/Qwen3-14B" and got[-2:] == ["--x=a b'c", "$(touch m)"], got


def test_a_backslash_in_the_name_is_escaped_in_the_keyfile() -> None:
    """A GLib key file reads `\\s` as a space (and refuses an unknown escape): a name the kernel
    takes with a backslash in it is written with the backslash doubled, so NetworkManager reads
    the name itself."""
    name = "e\\sx\\q"
    node = fresh_node(interfaces=[LOOPBACK, MGMT, dict(E810, name=name)])
    result = plan(
        cluster(data=f"{{interface: {json.dumps(name)}}}"), {"halo1": node, "halo2": node}
    )
    assert result.refused == {}
    assert "\ninterface-name=e\\\\sx\\\\q\n" in result.uploads("halo1")[KEYFILE]
