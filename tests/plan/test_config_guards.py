"""Issue 17's categories at the deploy's level: a config with one mistake of each kind is refused
by the inventory before any host is contacted; what passes reaches the nodes once and as written;
what only a node can tell (a system account as cluster user) refuses that node."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from halo_cluster.tools.commands.exits import BAD_CONFIG
from tests.plan.harness import plan
from tests.plan.nodes import (
    CONFIG,
    PASSWD,
    cluster,
    fresh_node,
    plan_cluster,
    refusal,
    serve_cluster,
)

ROOT = Path(__file__).resolve().parents[2]

# one mistake of each category of issue 17, all in one file: every one is reported, one line each
HOSTILE = """\
cluster_user: nobody
reboot: no
subnet: 10.0.0.0/24
serve:
  enabled: true
  model: Qwen/../etc
  port: 6379
  object_store_mib: 1000000
  api_key_file: key-folder
  extra_args: ['--host=0.0.0.0', '--api-key', 'sk-1', -tp, '4']
  env: {LD_PRELOAD: /tmp/x.so, RAY_AUTH_MODE: disabled}
nodes:
  - {name: halo1, ssh: {host: 10.0.0.11}, data: {mac: '01:00:5e:00:00:01'}}
  - {name: HALO1, ssh: {host: '10.0.0.11:2222'}, data: {interface: lo}}
  - {name: halo3, ssh: {host: halo3.lan}}
  - {name: halo4, ssh: {host: HALO3.LAN.}}
"""
EXPECTED = [
    r"cluster_user: 'nobody' is a system account",
    r"reboot: 'no' \(read as false\) is not one of: never, if-needed",
    r"serve\.model: 'Qwen/\.\./etc' is not a Hugging Face id",
    r"serve\.port: 6379 is Ray's port",
    r"serve\.object_store_mib: 1000000 is outside 75-65536 MiB",
    r"serve\.extra_args\[0\]: '--host=0\.0\.0\.0' sets what the tool owns: use serve\.listen",
    r"serve\.extra_args\[1\]: '--api-key' sets what the tool owns: use serve\.api_key_file",
    r"serve\.extra_args\[3\]: '-tp' sets what the tool owns: use serve\.tensor_parallel_size",
    r"serve\.env\.LD_PRELOAD: LD_PRELOAD is set by the tool",
    r"serve\.env\.RAY_AUTH_MODE: RAY_AUTH_MODE is set by the tool",
    r"nodes\[0\]\.data\.mac: '01:00:5e:00:00:01' is a multicast address",
    r"nodes\[1\]\.ssh\.host: '10\.0\.0\.11:2222' has a port",
]


def test_every_category_is_refused_before_any_host_is_contacted(tmp_path: Path) -> None:
    config = tmp_path / "cluster.yml"
    config.write_text(HOSTILE)
    result = subprocess.run(
        [str(Path(sys.executable).parent / "pyinfra"), "inventory.py", "debug-inventory"],
        cwd=ROOT,
        env={"CLUSTER_CONFIG": str(config), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == BAD_CONFIG, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if not line.startswith("--> ")]
    assert all(line.startswith(f"{config}: ") for line in lines), lines
    for pattern in EXPECTED:
        assert any(re.search(pattern, line) for line in lines), (pattern, lines)


def test_the_second_pass_refuses_what_needs_derived_values(tmp_path: Path) -> None:
    """Node and address mistakes are found once the types are right: one file, every line."""
    (tmp_path / "kh").mkdir()
    text = """\
cluster_user: vllm
subnet: 10.0.0.0/24
ssh: {known_hosts: kh}
nodes:
  - {name: halo1, ssh: {host: 10.0.0.11}, data: {mac: 'aa:bb:cc:dd:ee:01'}}
  - {name: HALO1, ssh: {host: 10.0.0.12}, data: {mac: 'AA:BB:CC:DD:EE:01'}}
  - {name: halo3, ssh: {host: halo3.lan}, data: {interface: thunderbolt0}}
  - {name: halo4, ssh: {host: HALO3.LAN.}}
"""
    from halo_cluster.config.loader import ConfigError, load_cluster

    (tmp_path / "cluster.yml").write_text(text)
    try:
        load_cluster(tmp_path / "cluster.yml")
        raise AssertionError("accepted")
    except ConfigError as error:
        found = error.problems
    for pattern in (
        r"nodes\[1\]\.name: name 'HALO1' is already used by nodes\[0\] \(halo1\)",
        r"nodes\[3\]\.ssh\.host: SSH host 'HALO3\.LAN\.' is already used by nodes\[2\]",
        r"subnet: 10\.0\.0\.0/24 contains 10\.0\.0\.11, the SSH host of nodes\[0\]",
        r"nodes\[1\]\.data\.mac: MAC 'aa:bb:cc:dd:ee:01' is already used by nodes\[0\]",
        r"nodes\[2\]\.data\.interface: thunderbolt0 is a Thunderbolt interface",
    ):
        assert any(re.search(pattern, line) for line in found), (pattern, found)
    # the filesystem checks run once the model is whole: fixed the rest, known_hosts is next
    fixed = text.replace("10.0.0.0/24", "192.168.100.0/29").replace("HALO1", "halo2")
    fixed = fixed.replace("'AA:BB:CC:DD:EE:01'", "'aa:bb:cc:dd:ee:02'")
    fixed = fixed.replace("HALO3.LAN.", "halo4.lan").replace("thunderbolt0", "enp1s0f0np0")
    (tmp_path / "cluster.yml").write_text(fixed)
    try:
        load_cluster(tmp_path / "cluster.yml")
        raise AssertionError("accepted")
    except ConfigError as error:
        assert any("kh is a directory, not a file" in line for line in error.problems)


def test_free_flags_and_variables_reach_the_head_once_each() -> None:
    serve = ", extra_args: ['--dtype=auto', '--seed', '7'], env: {VLLM_LOGGING_LEVEL: DEBUG}"
    head = plan_cluster(serve_cluster(serve=serve)).uploads("halo1")
    assert "--enforce-eager --dtype=auto --seed 7\n" in head[f"{CONFIG}/vllm-start.sh"]
    names = re.findall(r"^([A-Za-z_]\w*)=", head[f"{CONFIG}/serve.env"], re.MULTILINE)
    assert "VLLM_LOGGING_LEVEL" in names
    assert len(names) == len(set(names)), names  # no variable set twice: the tool's line holds


def test_a_system_account_as_cluster_user_refuses_the_node() -> None:
    system = PASSWD + "svc:x:990:990::/:/sbin/nologin\n"
    node = fresh_node(files={"/etc/passwd": system})
    result = plan(cluster(user="svc"), {"halo1": node, "halo2": fresh_node()})
    assert "cluster_user svc is a system account here (uid 990" in refusal(result)
    assert result.names("halo2")  # a new user there: created by the deploy
