"""cluster.yml validation and derived values."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from dataclasses import MISSING
from pathlib import Path

import pytest
import yaml

from halo_cluster import roles
from halo_cluster.config.hostdata import host_data, inventory_groups
from halo_cluster.config.loader import ConfigError, load_cluster, parse_cluster
from halo_cluster.config.schema import host_name
from halo_cluster.roles import docs
from halo_cluster.roles.kernel.schema import gtt_kernel_args
from halo_cluster.roles.serve.model import Serve
from halo_cluster.tools.commands.exits import BAD_CONFIG
from tests.unit.configs import VALID_ROCE, VALID_TB, problems, write

ROOT = Path(__file__).resolve().parents[2]


VALID_3_NODES = """\
cluster_user: vllm
subnet: 10.10.0.0/29
ssh: {user: admin, port: 2222, key: keys/id}
nodes:
  - {name: n1, ssh: {host: h1}}
  - {name: n2, ssh: {host: h2, port: 22}, role: head}
  - {name: n3, ssh: {host: h3}, data: {address: 10.10.0.2}}
"""


def test_valid_roce_pair(tmp_path: Path) -> None:
    cluster = load_cluster(write(tmp_path, VALID_ROCE))
    assert cluster.interconnect == "roce"
    assert str(cluster.subnet) == "192.168.100.0/30"
    assert cluster.mtu == 9000
    assert [n.role for n in cluster.nodes] == ["head", "worker"]
    assert [n.address for n in cluster.nodes] == ["192.168.100.1", "192.168.100.2"]
    assert cluster.nodes[0].interface == "enp1s0f0np0"
    assert (cluster.nodes[1].interface, cluster.nodes[1].mac) == (None, "aa:bb:cc:dd:ee:02")
    assert cluster.kernel_args == (
        "iommu=pt",
        "pci=realloc",
        "pcie_aspm=off",
        "amdgpu.gttsize=126976",
        "ttm.pages_limit=32505856",
    )
    assert cluster.kernel_args_remove == ("amd_iommu=off",)
    assert cluster.image == "docker.io/kyuz0/vllm-therock-gfx1151:latest"
    assert cluster.toolbox == "vllm-therock-gfx1151"
    assert cluster.reboot == "never"


def test_valid_thunderbolt_pair(tmp_path: Path) -> None:
    cluster = load_cluster(write(tmp_path, VALID_TB))
    assert str(cluster.subnet) == "192.168.2.0/30"
    assert [n.interface for n in cluster.nodes] == ["thunderbolt0", "thunderbolt0"]
    assert [n.address for n in cluster.nodes] == ["192.168.2.1", "192.168.2.2"]


def test_three_nodes_on_a_29(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "id").write_text("key\n")
    cluster = load_cluster(write(tmp_path, VALID_3_NODES))
    assert [n.role for n in cluster.nodes] == ["worker", "head", "worker"]
    # explicit addresses are kept, the others fill the free host addresses in order
    assert [n.address for n in cluster.nodes] == ["10.10.0.1", "10.10.0.3", "10.10.0.2"]
    assert [n.ssh_port for n in cluster.nodes] == [2222, 22, 2222]
    assert cluster.nodes[0].ssh_user == "admin"
    assert cluster.nodes[0].ssh_key == str(tmp_path / "keys" / "id")
    groups = inventory_groups(cluster)
    assert [name for name, _ in groups["head"]] == ["n2"]
    assert [name for name, _ in groups["workers"]] == ["n1", "n3"]
    head_data = groups["head"][0][1]
    assert head_data["halo_peers"] == {"n1": "10.10.0.1", "n3": "10.10.0.2"}
    assert head_data["halo_worker_addresses"] == ["10.10.0.1", "10.10.0.2"]
    assert head_data["halo_data_prefix"] == 29
    assert head_data["ssh_port"] == 22


@pytest.mark.parametrize(
    ("gib", "gttsize", "pages"),
    [(124, 126976, 32505856), (96, 98304, 25165824), (64, 65536, 16777216), (1, 1024, 262144)],
)
def test_gtt_derivation(gib: int, gttsize: int, pages: int) -> None:
    assert gtt_kernel_args(gib) == (f"amdgpu.gttsize={gttsize}", f"ttm.pages_limit={pages}")


def test_iommu_off_swaps_arguments(tmp_path: Path) -> None:
    text = VALID_ROCE + "kernel: {iommu: off, pci_realloc: false, extra_args: [quiet]}\n"
    cluster = load_cluster(write(tmp_path, text))
    assert cluster.kernel_args[0] == "amd_iommu=off"
    assert "quiet" in cluster.kernel_args
    assert set(cluster.kernel_args_remove) == {"iommu=pt", "pci=realloc"}


def test_known_hosts_turns_on_strict_checking(tmp_path: Path) -> None:
    text = VALID_ROCE + "ssh: {known_hosts: kh}\n"
    data = inventory_groups(load_cluster(write(tmp_path, text)))["head"][0][1]
    assert data["ssh_known_hosts_file"] == str(tmp_path / "kh")
    assert data["ssh_strict_host_key_checking"] == "yes"


BAD = {
    "yaml syntax": ("nodes: [\n  - a\n", r"cluster\.yml: line 2, column 3: YAML error"),
    "duplicate key": (VALID_ROCE + "mtu: 9000\nmtu: 1500\n", r"line \d+.*duplicate key 'mtu'"),
    "unknown key typo": (VALID_ROCE + "mut: 9000\n", r"cluster\.yml: mut: unknown key"),
    "unknown nested key": (
        VALID_ROCE + "kernel: {gtt: 64}\n",
        r"cluster\.yml: kernel\.gtt: unknown key",
    ),
    "missing user": (VALID_ROCE.replace("cluster_user: vllm\n", ""), r"cluster_user: required"),
    "missing nodes": ("cluster_user: vllm\n", r"cluster\.yml: nodes: required key is missing"),
    "empty nodes": ("cluster_user: vllm\nnodes: []\n", r"nodes: must list at least one"),
    "missing ssh host": (
        "cluster_user: u\nnodes:\n  - {name: a, ssh: {port: 22}}\n",
        r"nodes\[0\]\.ssh\.host: required key is missing",
    ),
    "wrong type mtu": (VALID_ROCE + "mtu: '9000'\n", r"mtu: expected integer, got string"),
    "bool is not int": (VALID_ROCE + "mtu: true\n", r"mtu: expected integer, got boolean"),
    "wrong type nodes": ("cluster_user: u\nnodes: halo1\n", r"nodes: expected list of mappings"),
    "empty file": ("", r"cluster\.yml: the file is empty"),
    "top level list": ("- a\n", r"cluster\.yml: expected a mapping, got list"),
    "duplicate names": (
        "cluster_user: u\nnodes:\n  - {name: a, ssh: {host: h1}}\n  - {name: a, ssh: {host: h2}}\n",
        r"nodes\[1\]\.name: name 'a' is already used by nodes\[0\]",
    ),
    "duplicate ssh": (
        "cluster_user: u\nnodes:\n  - {name: a, ssh: {host: h1}}\n  - {name: b, ssh: {host: h1}}\n",
        r"nodes\[1\]\.ssh\.host: SSH host 'h1' is already used by nodes\[0\]",
    ),
    "address outside": (
        VALID_ROCE.replace("interface: enp1s0f0np0}", "address: 10.0.0.1}"),
        r"nodes\[0\]\.data\.address: 10\.0\.0\.1 is outside the subnet 192\.168\.100\.0/30",
    ),
    "broadcast": (
        VALID_ROCE.replace("interface: enp1s0f0np0}", "address: 192.168.100.3}"),
        r"nodes\[0\]\.data\.address: 192\.168\.100\.3 is the broadcast address of "
        r"192\.168\.100\.0/30",
    ),
    "network address": (
        VALID_ROCE.replace("interface: enp1s0f0np0}", "address: 192.168.100.0}"),
        r"192\.168\.100\.0 is the network address",
    ),
    "not an address": (
        VALID_ROCE.replace("interface: enp1s0f0np0}", "address: banana}"),
        r"nodes\[0\]\.data\.address: 'banana' is not an IPv4 address",
    ),
    "same address": (
        "cluster_user: u\nnodes:\n  - {name: a, ssh: {host: h1}, data: {address: 192.168.100.1}}\n"
        "  - {name: b, ssh: {host: h2}, data: {address: 192.168.100.1}}\n",
        r"nodes\[1\]\.data\.address: 192\.168\.100\.1 is already the address of nodes\[0\]",
    ),
    "too many nodes": (
        VALID_ROCE + "  - {name: halo3, ssh: {host: 10.0.0.13}}\n",
        r"cluster\.yml: nodes: 3 nodes do not fit in 192\.168\.100\.0/30, which holds 2",
    ),
    "mtu too large roce": (VALID_ROCE + "mtu: 9500\n", r"mtu: 9500 is outside 1280-9216"),
    "mtu too small roce": (VALID_ROCE + "mtu: 1000\n", r"mtu: 1000 is outside 1280-9216"),
    "mtu too large tb": (VALID_TB + "mtu: 70000\n", r"mtu: 70000 is outside 68-65522"),
    "bad mac": (
        VALID_ROCE.replace("AA:bb:cc:dd:ee:02", "aa:bb:cc:dd:ee"),
        r"nodes\[1\]\.data\.mac: 'aa:bb:cc:dd:ee' is not a MAC address",
    ),
    "mac and interface": (
        VALID_ROCE.replace('mac: "AA', 'interface: eth0, mac: "AA'),
        r"nodes\[1\]\.data\.mac: give either `interface` or `mac`",
    ),
    "unknown interconnect": (
        VALID_ROCE + "interconnect: infiniband\n",
        r"interconnect: 'infiniband' is not one of: roce, thunderbolt",
    ),
    "unknown iommu": (
        VALID_ROCE + "kernel: {iommu: on}\n",
        r"kernel\.iommu: 'on' \(read as true\) is not one of",
    ),
    "unknown reboot": (VALID_ROCE + "reboot: always\n", r"reboot: 'always' is not one of"),
    "gtt zero": (VALID_ROCE + "kernel: {gtt_gib: 0}\n", r"kernel\.gtt_gib: 0 is outside 1-124"),
    "gtt negative": (VALID_ROCE + "kernel: {gtt_gib: -4}\n", r"-4 is outside 1-124 GiB"),
    "gtt fraction": (VALID_ROCE + "kernel: {gtt_gib: 1.5}\n", r"gtt_gib: expected integer"),
    "bad subnet": (VALID_ROCE + "subnet: 192.168.100.1/30\n", r"subnet: '192\.168\.100\.1/30' is"),
    "auto on thunderbolt": (
        VALID_TB.replace("host: 10.0.0.12}", "host: 10.0.0.12}, data: {interface: auto}"),
        r"nodes\[1\]\.data\.interface: `auto` finds an E810 port",
    ),
    "two heads": (
        "cluster_user: u\nnodes:\n  - {name: a, role: head, ssh: {host: h1}}\n"
        "  - {name: b, role: head, ssh: {host: h2}}\n",
        r"nodes\[1\]\.role: a second head",
    ),
    "arg with space": (
        VALID_ROCE + "kernel: {extra_args: ['quiet splash']}\n",
        r"kernel\.extra_args\[0\]: 'quiet splash' is not a single kernel argument",
    ),
    # hostile or impossible values: each refused with one line before any host is contacted
    "user injection": (
        VALID_ROCE.replace("cluster_user: vllm", 'cluster_user: "vllm$(touch /tmp/x)"'),
        r"cluster_user: 'vllm\$\(touch /tmp/x\)' is not a POSIX user name",
    ),
    "user root": (
        VALID_ROCE.replace("cluster_user: vllm", "cluster_user: root"),
        r"cluster_user: 'root' is not allowed",
    ),
    "user with space": (
        VALID_ROCE.replace("cluster_user: vllm", "cluster_user: vllm user"),
        r"cluster_user: 'vllm user' is not a POSIX user name",
    ),
    "toolbox path": (
        VALID_ROCE + "toolbox: ../../etc/x\n",
        r"toolbox: '\.\./\.\./etc/x' is not a container name",
    ),
    "image with shell": (
        VALID_ROCE + "image: 'docker.io/x/y:latest; rm -rf /'\n",
        r"image: 'docker\.io/x/y:latest; rm -rf /' is not an image reference",
    ),
    "gtt too large": (
        VALID_ROCE + "kernel: {gtt_gib: 512}\n",
        r"kernel\.gtt_gib: 512 is outside 1-124 GiB: a 128 GiB machine keeps 4 GiB",
    ),
    "node name with space": (
        VALID_ROCE.replace("name: halo1", "name: halo 1"),
        r"nodes\[0\]\.name: 'halo 1' is not a node name",
    ),
    "port 70000": (VALID_ROCE + "ssh: {port: 70000}\n", r"ssh\.port: 70000 is outside 1-65535"),
    "node port 0": (
        VALID_ROCE.replace("host: 10.0.0.11}", "host: 10.0.0.11, port: 0}"),
        r"nodes\[0\]\.ssh\.port: 0 is outside 1-65535",
    ),
    "quoted kernel arg": (
        VALID_ROCE + "kernel: {extra_args: ['foo=\"a b\"']}\n",
        r"kernel\.extra_args\[0\]: .* is not a single kernel argument",
    ),
    "interface too long": (
        VALID_ROCE.replace("interface: enp1s0f0np0", "interface: enp1s0f0np0abcdefgh"),
        r"nodes\[0\]\.data\.interface: 'enp1s0f0np0abcdefgh' is not an interface name",
    ),
    "interface with slash": (
        VALID_ROCE.replace("interface: enp1s0f0np0", "interface: en/p1"),
        r"nodes\[0\]\.data\.interface: 'en/p1' is not an interface name",
    ),
    "ssh host injection": (
        VALID_ROCE.replace("host: 10.0.0.11", "host: '10.0.0.11 -oProxyCommand=x'"),
        r"nodes\[0\]\.ssh\.host: .* is not a host name or address",
    ),
    "thunderbolt three nodes": (
        VALID_TB.replace(
            "interconnect: thunderbolt", "interconnect: thunderbolt\nsubnet: 192.168.2.0/29"
        )
        + "  - {name: c, ssh: {host: 10.0.0.13}}\n",
        r"nodes: 3 nodes on thunderbolt: a Thunderbolt link is one cable between exactly 2",
    ),
    "missing key file": (
        VALID_ROCE + "ssh: {key: absent_key}\n",
        r"ssh\.key: .*/absent_key is missing \(the SSH key of halo1, halo2\)",
    ),
    "add and remove": (
        VALID_ROCE + "kernel: {extra_args: [quiet], remove_args: [quiet]}\n",
        r"kernel\.remove_args\[0\]: 'quiet' is also an argument to add",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_config_is_one_clear_line(tmp_path: Path, case: str) -> None:
    text, pattern = BAD[case]
    found = problems(tmp_path, text)
    assert any(re.search(pattern, line) for line in found), found
    assert all("\n" not in line and line.startswith(str(tmp_path)) for line in found)


def test_all_problems_reported_together(tmp_path: Path) -> None:
    text = VALID_ROCE.replace("interface: enp1s0f0np0}", "address: 192.168.100.3}") + "mut: 1\n"
    found = problems(tmp_path, text)
    assert len(found) == 2, found


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_cluster(tmp_path / "absent.yml")
    assert info.value.problems == [
        f"{tmp_path / 'absent.yml'}: cannot read: No such file or directory"
    ]


@pytest.mark.parametrize("case", ["unknown key typo", "broadcast", "yaml syntax"])
def test_pyinfra_refuses_bad_config_without_traceback(tmp_path: Path, case: str) -> None:
    text, pattern = BAD[case]
    result = subprocess.run(
        [str(Path(sys.executable).parent / "pyinfra"), "inventory.py", "debug-inventory"],
        cwd=ROOT,
        env={"CLUSTER_CONFIG": str(write(tmp_path, text)), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == BAD_CONFIG
    assert re.search(pattern, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout


def test_example_config_is_valid() -> None:
    # parsed, not loaded: the example's key file need not exist on this machine
    cluster = parse_cluster(yaml.safe_load((ROOT / "cluster.example.yml").read_text()))
    assert [n.name for n in cluster.nodes] == ["halo1", "halo2"]


def test_docs_tables_match_schema() -> None:
    """Every key documented once: the cluster section in configuration.md, a role's on its page."""
    pages = [ROOT / "docs" / "configuration.md"]
    pages += [ROOT / "docs" / "roles" / f"{name}.md" for name in roles.sections()]
    tables = [table for page in pages for table in docs.BLOCK.findall(page.read_text())]
    rows = [
        row
        for table in tables
        for row in re.findall(r"^\| `([^`]+)` \| ([^|]+) \| ([^|]+) \|", table, re.MULTILINE)
    ]
    documented = {key: (type_.strip(), default.strip()) for key, type_, default in rows}
    assert len(documented) == len(rows)
    assert documented == {f.path: (f.type, f.default_text) for f in roles.schema().fields}


def test_docs_example_is_valid(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    examples = re.findall(r"```yaml\n(.*?)```", doc, re.DOTALL)
    assert len(examples) == 2
    for text in examples:
        assert parse_cluster(yaml.safe_load(text), base_dir=tmp_path)


SERVING = VALID_ROCE + "serve: {enabled: true, model: Qwen/Qwen3-14B}\n"


def test_ray_token_beside_the_config_made_by_a_deploy_not_by_loading(tmp_path: Path) -> None:
    """Loading writes nothing (issue 34): the first deploy makes the token (roles/serve/
    controller.py, tests/plan/test_membership.py); once it is there it is checked."""
    token = tmp_path / ".halo-cluster" / "ray-token"
    cluster = load_cluster(write(tmp_path, SERVING))
    assert cluster.serve.ray_token_file == str(token) and not token.parent.exists()
    token.parent.mkdir()
    token.write_text("two\nlines\n")
    token.chmod(0o600)
    with pytest.raises(ConfigError) as raised:
        load_cluster(write(tmp_path, SERVING))
    assert "serve.ray_token_file: " in raised.value.problems[0]


def test_a_given_ray_token_file_must_exist(tmp_path: Path) -> None:
    text = SERVING.replace("enabled: true", "enabled: true, ray_token_file: secrets/ray")
    found = problems(tmp_path, text)
    assert found == [f"{tmp_path / 'cluster.yml'}: serve.ray_token_file: "
                     f"{tmp_path / 'secrets/ray'} is missing"]  # fmt: skip
    assert not (tmp_path / ".halo-cluster").exists()


def test_the_serve_model_is_the_schema_section() -> None:
    """Serve's fields are the `serve.*` keys, and their host data names follow (no default of
    its own: an added key without a field, or a field without a key, fails here)."""
    keys = {
        f.path.removeprefix("serve.") for f in roles.schema().fields if f.path.startswith("serve.")
    }
    assert set(Serve.__dataclass_fields__) == keys
    assert all(field.default is MISSING for field in Serve.__dataclass_fields__.values())


def test_every_plain_key_reaches_host_data_by_its_name(tmp_path: Path) -> None:
    """A key needs no derivation to reach the roles: `kernel.iommu` is `halo_kernel_iommu`."""
    cluster = load_cluster(write(tmp_path, VALID_ROCE + "kernel: {iommu: 'off'}\n"))
    data = host_data(cluster, cluster.nodes[0])
    assert data["halo_kernel_iommu"] == "off" and data["halo_verify_max_latency_us"] == 10
    assert {host_name(path) for path in cluster.settings} <= set(data)
    assert data["halo_serve_ray_token_file"] == cluster.serve.ray_token_file  # derived wins


def test_a_roles_values_are_reached_by_their_host_data_names(tmp_path: Path) -> None:
    """The model names no role's key: `cluster.kernel_args` is `halo_kernel_args`, derived by the
    kernel role's section; `cluster.serve` is the serve role's typed section."""
    cluster = load_cluster(write(tmp_path, VALID_ROCE))
    data = host_data(cluster, cluster.nodes[0])
    assert list(cluster.kernel_args) == data["halo_kernel_args"]
    assert cluster.mtu == data["halo_mtu"] and cluster.serve is cluster.derived["serve"]
    with pytest.raises(AttributeError, match="no value 'no_such_key'"):
        _ = cluster.no_such_key
    assert copy.deepcopy(cluster) == cluster
