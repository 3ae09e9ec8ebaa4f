"""Hostile, impossible and ambiguous cluster.yml values: each refused with one line naming the key
(or accepted with a printed warning), in bounded time, before any host is contacted."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from halo_cluster import roles
from halo_cluster.config import serving
from halo_cluster.config.hostdata import host_data
from halo_cluster.config.loader import ConfigError, load_cluster, parse_cluster
from halo_cluster.config.schema import current
from halo_cluster.decide import preflight
from halo_cluster.decide.safety import cluster_user_problem
from halo_cluster.node.environment import roce_nccl
from halo_cluster.roles.serve import flags
from tests.unit.configs import VALID_ROCE, VALID_TB, problems, write

ROOT = Path(__file__).resolve().parents[2]
SERVING = VALID_ROCE + "serve: {enabled: true, model: Qwen/Qwen3-14B%s}\n"


def refused(tmp_path: Path, text: str, pattern: str) -> list[str]:
    found = problems(tmp_path, text)
    assert any(re.search(pattern, line) for line in found), found
    assert all("\n" not in line and len(line) < 400 for line in found), found
    return found


def serve_with(tmp_path: Path, serve: str) -> str:
    return SERVING % (", " + serve)


# --- 1. owned flags ---------------------------------------------------------------------------

OWNED = {
    "--host=0.0.0.0": "serve.listen",
    "--host": "serve.listen",
    "--hos=0.0.0.0": "serve.listen",  # argparse takes a unique prefix
    "--host.x=1": "serve.listen",
    "--port=9000": "serve.port",
    "--api-key=secret": "serve.api_key_file",
    "--api_key=secret": "serve.api_key_file",
    "--served-model-name=x": "serve.served_model_name",
    "--model=Qwen/Other": "serve.model",
    "--tensor-parallel-size=4": "serve.tensor_parallel_size",
    "--tensor_parallel_size=4": "serve.tensor_parallel_size",
    "-tp": "serve.tensor_parallel_size",
    "-tp=4": "serve.tensor_parallel_size",
    "-tp4": "serve.tensor_parallel_size",
    "--pipeline-parallel-size=2": "serve.pipeline_parallel_size",
    "-pp": "serve.pipeline_parallel_size",
    "--data-parallel-size=2": "serve.tensor_parallel_size",
    "--data_parallel_size_local=1": "serve.tensor_parallel_size",
    "--no-data-parallel-hybrid-lb": "serve.tensor_parallel_size",  # a boolean of the family
    "-dp": "serve.tensor_parallel_size",
    "-dpl": "serve.tensor_parallel_size",
    "--distributed-executor-backend=mp": "serve.launcher",
    "--gpu-memory-utilization=0.5": "serve.gpu_memory_utilization",
    "--max-model-len=1024": "serve.max_model_len",
    "--max_num_seqs=4": "serve.max_num_seqs",
    "--enforce-eager": "serve.enforce_eager",
    "--no-enforce-eager": "serve.enforce_eager",
    "--uds=/tmp/vllm.sock": "serve.listen",
    "--headless": "serve.launcher",
    "--config=/srv/flags.yaml": "one flag per item",
}
FREE = [
    "--trust-remote-code",
    "--dtype=auto",
    "--model-impl=vllm",
    "--config-format=hf",
    "--max-num-batched-tokens=8192",
    "--enable-prefix-caching",
    "--kv-cache-dtype=fp8",
    "-O3",
    "--seed",
    "-1",
    "0.0.0.0",
]


@pytest.mark.parametrize("argument", sorted(OWNED))
def test_owned_flag_is_refused_with_the_key_to_use(tmp_path: Path, argument: str) -> None:
    text = serve_with(tmp_path, f"extra_args: ['{argument}']")
    pattern = (
        rf"serve\.extra_args\[0\]: .* sets what the tool owns: use .*{re.escape(OWNED[argument])}"
    )
    refused(tmp_path, text, pattern)


def test_flag_and_value_as_two_items_is_refused(tmp_path: Path) -> None:
    found = refused(
        tmp_path,
        serve_with(tmp_path, "extra_args: ['--host', '0.0.0.0']"),
        r"serve\.extra_args\[0\]: '--host' sets what the tool owns: use serve\.listen",
    )
    assert len(found) == 1, found


@pytest.mark.parametrize("argument", FREE)
def test_free_flags_pass(argument: str) -> None:
    assert flags.owned_flag(argument) is None


def test_every_flag_argv_sets_is_owned(tmp_path: Path) -> None:
    """On host data as the inventory sets it from a cluster.yml, not built by hand: a new flag's
    key needs no line here."""
    keys = "served_model_name: qwen, max_model_len: 8192, max_num_seqs: 8"
    cluster = load_cluster(write(tmp_path, serve_with(tmp_path, keys)))
    data = SimpleNamespace(**host_data(cluster, cluster.head))
    args = flags.argv(data)  # from host data alone
    assert args[0] == data.halo_serve_model and flags.owned_flag("--model") == "serve.model"
    flags_set = [a for a in args[1:] if a.startswith("-")]
    assert len(flags_set) == len(args) - 1
    assert all(flags.owned_flag(flag) for flag in flags_set), flags_set


def test_every_spelling_of_every_owned_flag_is_refused() -> None:
    """Derived from the one table: `--flag`, `--flag=value`, `--no-flag` (argparse's form of a
    boolean, refused for every owned flag), each alias."""
    for flag in flags.FLAGS:
        spellings = [f"--{flag.name}", f"--{flag.name}=1", *(f"-{a}" for a in flag.aliases)]
        spellings.append(f"--no-{flag.name}")
        if flag.family:
            spellings += [f"--{flag.name}-x", f"--no-{flag.name}-x=1"]
        assert {flags.owned_flag(s) for s in spellings} == {flag.instead}, flag.name
    assert flags.owned_flag("--no-enable-chunked-prefill") is None


# --- 2. pinned variables ----------------------------------------------------------------------


def template_variables() -> set[str]:
    names = set()
    for name in (
        "serve/serve.env.j2",
        "launcher/cluster.env.j2",
        "serve/secrets.env.j2",
    ):
        text = (ROOT / "templates" / name).read_text()
        names |= set(re.findall(r"^([A-Za-z_][A-Za-z0-9_]*)=", text, re.MULTILINE))
    return names | set(roce_nccl("irdma0"))  # the RoCE block both env templates render


def test_pinned_variables_cover_every_variable_the_templates_set() -> None:
    names = template_variables()
    assert {"RAY_AUTH_MODE", "NCCL_SOCKET_IFNAME", "VLLM_HOST_IP", "VLLM_API_KEY"} <= names
    assert not {
        n for n in names - set(serving.DEFAULTED_VARIABLES) if not serving.pinned_variable(n)
    }
    # a defaulted variable is the user's to set: never refused
    assert not {n for n in serving.DEFAULTED_VARIABLES if serving.pinned_variable(n)}


def test_pinned_variables_cover_the_serving_contract() -> None:
    contract = (
        "VLLM_RPC_BASE_PATH TRITON_CACHE_DIR VLLM_NO_USAGE_STATS DO_NOT_TRACK HF_TOKEN "
        "HF_TOKEN_PATH HF_HOME VLLM_API_KEY VLLM_HOST_IP RAY_AUTH_MODE RAY_AUTH_TOKEN_PATH "
        "RAY_ADDRESS NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME NCCL_IB_HCA PATH LD_PRELOAD "
        "LD_LIBRARY_PATH PYTHONPATH PYTHONHOME"
    ).split()
    assert [n for n in contract if not serving.pinned_variable(n)] == []


@pytest.mark.parametrize(
    ("env", "pattern"),
    [
        ("{LD_PRELOAD: /tmp/x.so}", r"serve\.env\.LD_PRELOAD: LD_PRELOAD is set by the tool"),
        ("{PYTHONPATH: /tmp}", r"serve\.env\.PYTHONPATH: .* set by the tool"),
        ("{PATH: /tmp}", r"serve\.env\.PATH: .* set by the tool"),
        ("{RAY_AUTH_MODE: disabled}", r"serve\.env\.RAY_AUTH_MODE: .* set by the tool"),
        ("{NCCL_SOCKET_IFNAME: eno1}", r"serve\.env\.NCCL_SOCKET_IFNAME: .* set by the tool"),
        ("{VLLM_API_KEY: k}", r"serve\.env\.VLLM_API_KEY: .* use serve\.api_key_file"),
        ("{HF_TOKEN: t}", r"serve\.env\.HF_TOKEN: .* use serve\.hf_token_file"),
        ("{lower: x}", r"serve\.env\.lower: 'lower' is not an environment variable name"),
        ("{'A-B': x}", r"serve\.env\.A-B: 'A-B' is not an environment variable name"),
        ('{FOO: "a\\nRAY_AUTH_MODE=disabled"}', r"serve\.env\.FOO: the value of FOO is not one"),
        ('{FOO: "a\\u0000b"}', r"serve\.env\.FOO: the value of FOO is not one line"),
    ],
)
def test_pinned_or_malformed_variable_is_refused(tmp_path: Path, env: str, pattern: str) -> None:
    refused(tmp_path, serve_with(tmp_path, f"env: {env}"), pattern)


def test_free_variables_pass(tmp_path: Path) -> None:
    text = serve_with(tmp_path, "env: {VLLM_LOGGING_LEVEL: DEBUG, HIP_FORCE_DEV_KERNARG: '1'}")
    assert load_cluster(write(tmp_path, text)).serve.env["VLLM_LOGGING_LEVEL"] == "DEBUG"


# --- 3. secret files --------------------------------------------------------------------------


def secret_config(tmp_path: Path, name: str = "key") -> str:
    return serve_with(tmp_path, f"api_key_file: {name}")


def secret(tmp_path: Path, data: bytes, mode: int = 0o600) -> Path:
    path = tmp_path / "key"
    path.write_bytes(data)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        (b"k" * 5000, r"is larger than 4 KiB"),
        (b"\xff\xfekey\n", r"is not UTF-8 text"),
        (b"key\nVLLM_HOST_IP=1.2.3.4\n", r"has more than one line"),
        (b"key\n\n", r"has more than one line"),
        (b"ke\x1by\n", r"holds control characters"),
        (b"", r"is empty"),
        (b"\n", r"is empty"),
    ],
)
def test_malformed_secret_file_is_one_line(tmp_path: Path, data: bytes, pattern: str) -> None:
    secret(tmp_path, data)
    refused(tmp_path, secret_config(tmp_path), rf"serve\.api_key_file: .*/key {pattern}")


def test_secret_that_is_no_regular_file(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    refused(tmp_path, secret_config(tmp_path, "folder"), r"api_key_file: .* is a directory")
    start = time.monotonic()
    refused(tmp_path, secret_config(tmp_path, "/dev/zero"), r"/dev/zero is not a regular file")
    os.mkfifo(tmp_path / "fifo")  # opening it would wait for a writer forever
    refused(tmp_path, secret_config(tmp_path, "fifo"), r"fifo is not a regular file")
    assert time.monotonic() - start < 2


def test_secret_with_one_line_and_its_newline_passes(tmp_path: Path, capsys) -> None:
    secret(tmp_path, b"sk-abc123\n")
    cluster = load_cluster(write(tmp_path, secret_config(tmp_path)))
    assert cluster.serve.api_key_file == str(tmp_path / "key") and not cluster.warnings
    assert capsys.readouterr().err == ""


def test_readable_secret_is_a_warning_with_the_fix(tmp_path: Path, capsys) -> None:
    path = secret(tmp_path, b"sk-abc123\n", 0o644)
    cluster = load_cluster(write(tmp_path, secret_config(tmp_path)))
    line = f"serve.api_key_file: warning: {path} is readable by other users: chmod 600 {path}"
    assert any(w.endswith(line) for w in cluster.warnings), cluster.warnings
    assert line in capsys.readouterr().err


# --- 4. ports and sizes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("port", "pattern"),
    [
        (22, r"22 is outside 1024-65535"),
        (80, r"80 is outside 1024-65535 \(below 1024 needs root\)"),
        (70000, r"70000 is outside 1024-65535"),
        (6379, r"6379 is Ray's port: choose another port"),
        (6385, r"6385 is Ray's metrics-export-port"),
        (10001, r"10001 is Ray's client port"),
        (10100, r"10100 is one of Ray's worker ports \(10002-10199\)"),
    ],
)
def test_serve_port_pinned_or_privileged(tmp_path: Path, port: int, pattern: str) -> None:
    refused(tmp_path, serve_with(tmp_path, f"port: {port}"), rf"serve\.port: {pattern}")


def test_ssh_port_is_named_as_such() -> None:
    assert serving.pinned_port(22) == "is SSH's port"


@pytest.mark.parametrize("port", [1024, 8000, 65535])
def test_serve_port_free(tmp_path: Path, port: int) -> None:
    assert load_cluster(write(tmp_path, serve_with(tmp_path, f"port: {port}"))).serve.port == port


@pytest.mark.parametrize("mib", [0, 74, 65537, 1_000_000])
def test_object_store_outside_its_bounds(tmp_path: Path, mib: int) -> None:
    text = serve_with(tmp_path, f"object_store_mib: {mib}")
    refused(tmp_path, text, rf"serve\.object_store_mib: {mib} is outside 75-65536 MiB: Ray's")


@pytest.mark.parametrize("mib", [75, 256, 65536])
def test_object_store_inside_its_bounds(tmp_path: Path, mib: int) -> None:
    text = serve_with(tmp_path, f"object_store_mib: {mib}")
    assert load_cluster(write(tmp_path, text)).serve.object_store_mib == mib


def test_preflight_weighs_the_object_store_against_memtotal() -> None:
    mem = 124 * 1024**2  # MemTotal, kB
    assert preflight.object_store(mem, 65536, False, "").status == preflight.WARN
    assert "lower serve.object_store_mib" in preflight.object_store(mem, 65536, False, "").detail
    assert preflight.object_store(mem, 32768, False, "").status == preflight.OK
    hidden = preflight.object_store(mem, 65536, True, "systemd-nspawn container")
    assert hidden.status == preflight.NOT_VERIFIED
    checks = preflight.run(
        {"virt": "none"},
        "thunderbolt",
        None,
        {},
        96 * 1024**3,
        object_store_mib=256,
        memtotal_kib=mem,
    )
    assert [c.status for c in checks if c.name == "object store"] == [preflight.OK]


# --- 5. models --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    ["Qwen/Qwen3-14B", "meta-llama/Llama-3.1-8B-Instruct", "a_b/c.d-e", "/srv/models/qwen3"],
)
def test_model_accepted(tmp_path: Path, model: str) -> None:
    text = VALID_ROCE + f"serve: {{enabled: true, model: '{model}'}}\n"
    assert load_cluster(write(tmp_path, text)).serve.model == model


@pytest.mark.parametrize(
    "model",
    [
        "Qwen/../etc",
        "../x/y",
        "org/..",
        "org/.hidden",
        "org/name.git",
        "org--x/y",
        "a/b/c",
        "Qwen",
        "Qwen/Qwen3 14B",
        "/srv/../etc/shadow",
        "/srv/./m",
        "/srv//m",
        "/srv/m/",
        "/",
        "/etc/models",
        "/proc/self",
        "/root/.cache/huggingface",
        "/usr",
    ],
)
def test_model_refused(tmp_path: Path, model: str) -> None:
    text = VALID_ROCE + f"serve: {{enabled: true, model: '{model}'}}\n"
    refused(tmp_path, text, rf"serve\.model: '{re.escape(model)}' ")


# --- 6. nodes, addresses and links ------------------------------------------------------------


def pair(a: str, b: str, top: str = "", data: str = "") -> str:
    return (
        f"cluster_user: vllm\n{top}nodes:\n  - {{name: n1, ssh: {{host: '{a}'}}{data}}}\n"
        f"  - {{name: n2, ssh: {{host: '{b}'}}}}\n"
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("halo1.lan", "halo1.lan."),
        ("halo1.lan", "HALO1.LAN"),
        ("fe80::1", "FE80:0:0:0:0:0:0:1"),
        ("2001:db8::1", "2001:0db8:0000::0001"),
    ],
)
def test_one_machine_is_one_node(tmp_path: Path, a: str, b: str) -> None:
    refused(
        tmp_path, pair(a, b), r"nodes\[1\]\.ssh\.host: SSH host .* is already used by nodes\[0\]"
    )


def test_hosts_are_kept_in_their_normal_form(tmp_path: Path) -> None:
    cluster = load_cluster(write(tmp_path, pair("Halo1.LAN.", "FE80:0:0::2")))
    assert [n.ssh_host for n in cluster.nodes] == ["halo1.lan", "fe80::2"]


@pytest.mark.parametrize("host", ["10.0.0.11:2222", "halo1:22", "[fe80::1]:22"])
def test_host_with_a_port(tmp_path: Path, host: str) -> None:
    refused(tmp_path, pair(host, "h2"), r"nodes\[0\]\.ssh\.host: .* has a port: .* ssh\.port")


@pytest.mark.parametrize("host", ["10.0.0.256", "a:b", "fe80::g"])
def test_host_that_is_no_address(tmp_path: Path, host: str) -> None:
    refused(tmp_path, pair(host, "h2"), r"nodes\[0\]\.ssh\.host: .* is not an IPv[46] address")


def test_node_names_differing_in_case(tmp_path: Path) -> None:
    text = VALID_ROCE.replace("name: halo2", "name: HALO1")
    refused(tmp_path, text, r"nodes\[1\]\.name: name 'HALO1' is already used by nodes\[0\] \(halo1")


def test_subnet_holding_a_management_address(tmp_path: Path) -> None:
    text = pair("10.0.0.11", "10.0.0.12", top="subnet: 10.0.0.0/24\n")
    refused(tmp_path, text, r"subnet: 10\.0\.0\.0/24 contains 10\.0\.0\.11, the SSH host of nodes")


def test_data_address_that_is_a_node_s_ssh_host(tmp_path: Path) -> None:
    text = pair("192.168.100.2", "h2", data=", data: {address: 192.168.100.2}")
    refused(tmp_path, text, r"nodes\[0\]\.data\.address: 192\.168\.100\.2 is the SSH host of")


@pytest.mark.parametrize(
    ("subnet", "pattern"),
    [
        ("0.0.0.0/0", r"wider than a /8"),
        ("10.0.0.0/7", r"wider than a /8"),
        ("127.0.0.0/24", r"overlaps 127\.0\.0\.0/8"),
        ("224.0.0.0/24", r"overlaps 224\.0\.0\.0/4"),
        ("x" * 5000, r"'x{20,}'\.\.\. \(5000 characters\) is not an IPv4 network"),
    ],
)
def test_subnet_refused_in_bounded_time(tmp_path: Path, subnet: str, pattern: str) -> None:
    start = time.monotonic()
    refused(tmp_path, pair("h1", "h2", top=f"subnet: '{subnet}'\n"), rf"subnet: .*{pattern}")
    assert time.monotonic() - start < 1


def test_a_slash_8_is_derived_in_bounded_time(tmp_path: Path) -> None:
    start = time.monotonic()
    cluster = load_cluster(write(tmp_path, pair("h1", "h2", top="subnet: 10.0.0.0/8\n")))
    assert [n.address for n in cluster.nodes] == ["10.0.0.1", "10.0.0.2"]
    assert time.monotonic() - start < 1


@pytest.mark.parametrize(
    ("mac", "pattern"),
    [
        ("01:00:5e:00:00:01", r"is a multicast address"),
        ("ff:ff:ff:ff:ff:ff", r"is a multicast address"),
        ("00:00:00:00:00:00", r"is the all-zero address"),
    ],
)
def test_mac_that_no_port_has(tmp_path: Path, mac: str, pattern: str) -> None:
    text = VALID_ROCE.replace("AA:bb:cc:dd:ee:02", mac)
    refused(tmp_path, text, rf"nodes\[1\]\.data\.mac: '{mac}' {pattern}")


def test_one_mac_on_two_nodes(tmp_path: Path) -> None:
    text = VALID_ROCE.replace("interface: enp1s0f0np0", 'mac: "aa:BB:cc:dd:ee:02"')
    refused(tmp_path, text, r"nodes\[1\]\.data\.mac: MAC 'aa:bb:cc:dd:ee:02' is already used")


def test_loopback_is_no_data_interface(tmp_path: Path) -> None:
    text = VALID_ROCE.replace("interface: enp1s0f0np0", "interface: lo")
    refused(tmp_path, text, r"nodes\[0\]\.data\.interface: 'lo' is the loopback interface")


def test_roce_on_a_thunderbolt_interface(tmp_path: Path) -> None:
    text = VALID_ROCE.replace("interface: enp1s0f0np0", "interface: thunderbolt0")
    refused(tmp_path, text, r"nodes\[0\]\.data\.interface: thunderbolt0 is a Thunderbolt interface")


def test_thunderbolt_on_an_e810_name_is_a_warning(tmp_path: Path, capsys) -> None:
    text = VALID_TB.replace("host: 10.0.0.11}", "host: 10.0.0.11}, data: {interface: enp194s0np0}")
    cluster = load_cluster(write(tmp_path, text))
    assert cluster.nodes[0].interface == "enp194s0np0"
    assert (
        "nodes[0].data.interface: warning: enp194s0np0 looks like an E810"
        in capsys.readouterr().err
    )


def test_thunderbolt_of_one_node(tmp_path: Path) -> None:
    text = VALID_TB.split("  - {name: b")[0]
    refused(tmp_path, text, r"nodes: 1 node on thunderbolt: .* exactly 2 nodes")


def test_known_hosts_must_be_a_file(tmp_path: Path) -> None:
    (tmp_path / "kh").mkdir()
    text = VALID_ROCE + "ssh: {known_hosts: kh}\n"
    refused(tmp_path, text, r"ssh\.known_hosts: .*/kh is a directory, not a file \(the known_hosts")


def test_key_must_be_a_file(tmp_path: Path) -> None:
    (tmp_path / "id").mkdir()
    refused(tmp_path, VALID_ROCE + "ssh: {key: id}\n", r"ssh\.key: .*/id is a directory")


@pytest.mark.parametrize("user", ["nobody", "daemon", "bin", "sshd", "systemd-network"])
def test_system_account_is_no_cluster_user(tmp_path: Path, user: str) -> None:
    text = VALID_ROCE.replace("cluster_user: vllm", f"cluster_user: {user}")
    refused(tmp_path, text, rf"cluster_user: '{user}' is a system account")


@pytest.mark.parametrize(
    ("line", "refused_uid"),
    [
        ("vllm:x:1000:1000::/home/vllm:/bin/bash", None),
        ("vllm:x:60000:60000::/home/vllm:/bin/bash", None),
        ("vllm:x:990:990::/:/sbin/nologin", 990),
        ("vllm:x:65534:65534::/nonexistent:/sbin/nologin", 65534),
        ("other:x:12:12::/:/sbin/nologin", None),
    ],
)
def test_node_refuses_a_system_account(line: str, refused_uid: int | None) -> None:
    problem = cluster_user_problem(f"root:x:0:0::/root:/bin/bash\n{line}\n", "vllm")
    if refused_uid is None:
        assert problem is None
    else:
        assert problem and f"uid {refused_uid}" in problem and "system account" in problem


# --- 7. YAML that is no plain config ----------------------------------------------------------


def timed_problems(tmp_path: Path, text: str | bytes, limit: float = 2.0) -> list[str]:
    path = tmp_path / "cluster.yml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    start = time.monotonic()
    with pytest.raises(ConfigError) as info:
        load_cluster(path)
    assert time.monotonic() - start < limit
    found = info.value.problems
    assert len(found) == 1 and "\n" not in found[0] and len(found[0]) < 400, found
    return found


BILLION_LAUGHS = (
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
    )
    + "cluster_user: *i\nnodes: *i\n"
)


def test_billion_laughs(tmp_path: Path) -> None:
    found = timed_problems(tmp_path, BILLION_LAUGHS, limit=1.0)
    assert "aliases expand to more than 10000 values" in found[0]


def test_alias_cycle(tmp_path: Path) -> None:
    found = timed_problems(tmp_path, "cluster_user: vllm\nnodes: &a [*a]\n")
    assert "nested deeper than 10 levels" in found[0]


def test_deep_nesting(tmp_path: Path) -> None:
    found = timed_problems(tmp_path, "nodes: " + "[" * 10000 + "]" * 10000 + "\n")
    assert re.search(
        r"cluster\.yml: line 1, column \d+: YAML error: nested deeper than 10", found[0]
    )


def test_not_utf8(tmp_path: Path) -> None:
    found = timed_problems(tmp_path, b"cluster_user: v\xe9llm\n")
    assert found[0].endswith("cluster.yml: is not UTF-8 text (byte 16)")


def test_larger_than_a_mebibyte(tmp_path: Path) -> None:
    found = timed_problems(tmp_path, "# " + "x" * (1024 * 1024) + "\n")
    assert found[0].endswith("cluster.yml: larger than 1024 KiB: not a cluster.yml")


def test_config_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "cluster.yml").mkdir()
    with pytest.raises(ConfigError) as info:
        load_cluster(tmp_path / "cluster.yml")
    assert info.value.problems == [f"{tmp_path / 'cluster.yml'}: is not a regular file"]


def test_complex_key(tmp_path: Path) -> None:
    found = timed_problems(tmp_path, VALID_ROCE + "? [a, b]\n: 1\n")
    assert "key must be a plain name, not a list or a mapping" in found[0]


def test_keys_are_what_the_user_wrote(tmp_path: Path) -> None:
    found = problems(tmp_path, VALID_ROCE + "1: x\nyes: y\n")
    known = ", ".join(sorted(roles.schema().children_of("")))  # the cluster's and every role's
    assert "cluster_user, image, " in known and "serve, ssh" in known
    assert any(
        line.endswith(f"cluster.yml: 1: unknown key (known keys: {known})") for line in found
    )
    assert any(": yes: unknown key" in line for line in found), found


def test_long_value_is_quoted_short(tmp_path: Path) -> None:
    found = timed_problems(tmp_path, VALID_ROCE + "toolbox: '" + "x" * 900_000 + " y'\n")
    assert re.search(r"toolbox: 'x+'\.\.\. \(900002 characters\) is not a container name", found[0])
    assert len(found[0]) < len(str(tmp_path)) + 200


def test_long_key_is_quoted_short(tmp_path: Path) -> None:
    found = timed_problems(tmp_path, VALID_ROCE + "? " + "k" * 500_000 + "\n: 1\n")
    assert re.search(r"cluster\.yml: 'k+'\.\.\. \(500000 characters\): unknown key", found[0])


def test_huge_integer(tmp_path: Path) -> None:
    found = timed_problems(tmp_path, VALID_ROCE + "mtu: " + "9" * 5000 + "\n")
    assert "an integer of more than 30 digits" in found[0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("reboot: no\n", "reboot: 'no' (read as false) is not one of: never, if-needed"),
        ("reboot: off\n", "reboot: 'off' (read as false) is not one of: never, if-needed"),
        ("reboot: YES\n", "reboot: 'YES' (read as true) is not one of: never, if-needed"),
        ("kernel: {iommu: On}\n", "kernel.iommu: 'On' (read as true) is not one of: pt, off"),
        (
            "toolbox: yes\n",
            "toolbox: expected string, got boolean 'yes' (read as true); to mean the word, "
            "quote it: 'yes'",
        ),
        (
            "kernel: {extra_args: [quiet, off]}\n",
            "kernel.extra_args[1]: expected string, got boolean 'off' (read as false); to mean "
            "the word, quote it: 'off'",
        ),
        ("kernel: {iommu: false}\n", "iommu: 'false' (read as false) is not one of: pt, off"),
    ],
)
def test_booleans_are_quoted_as_written(tmp_path: Path, text: str, message: str) -> None:
    found = problems(tmp_path, VALID_ROCE + text)
    assert any(line.endswith(message) for line in found), found


def test_iommu_off_still_means_the_word(tmp_path: Path) -> None:
    cluster = load_cluster(write(tmp_path, VALID_ROCE + "kernel: {iommu: OFF}\n"))
    assert cluster.kernel_args[0] == "amd_iommu=off"


def test_a_boolean_is_the_word_only_where_the_choices_hold_it() -> None:
    """`Field.word` (BOOLEAN_WORDS, declared once in the schema): a document parsed without
    the text as written (`parse_cluster` of a dict) maps false to `off` where it is a choice."""
    iommu, reboot = current().by_path["kernel.iommu"], current().by_path["reboot"]
    assert (iommu.word(False), iommu.word(False, "No"), iommu.word(True)) == ("off", None, None)
    assert (reboot.word(False), reboot.word(True, "yes")) == (None, None)
    cluster = parse_cluster(yaml.safe_load(VALID_ROCE + "kernel: {iommu: off}\n"))
    assert cluster.kernel_args[0] == "amd_iommu=off"


def test_anchors_within_bounds_still_work(tmp_path: Path) -> None:
    text = (
        "cluster_user: vllm\nssh: &ssh {port: 2222}\nnodes:\n"
        "  - {name: a, ssh: {<<: *ssh, host: h1}}\n  - {name: b, ssh: {<<: *ssh, host: h2}}\n"
    )
    assert [n.ssh_port for n in load_cluster(write(tmp_path, text)).nodes] == [2222, 2222]
