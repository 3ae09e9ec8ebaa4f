"""The lab serves: real Ray on every node and the lab's stand-in vllm on the head, as rootless
services that a deploy starts, a reboot brings back and `serve.enabled: false` removes."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from halo_cluster.config.lock import HISTORY
from halo_cluster.roles.metrics.model import PROMETHEUS_PORT
from lab import cli, faults, hub
from tests.e2e.conftest import ROOT, Lab, changed_hosts
from tests.e2e.lab_metrics import answers
from tests.e2e.serving_lab import HEAD, SERVE, health, journal, user, wait_serving
from tests.e2e.waits import until
from tests.infra.target import connects

MODEL = "facebook/opt-125m"
IMAGE = "docker.io/kyuz0/vllm-therock-gfx1151:latest"


def test_serves_the_model_on_the_head_data_address(served: Lab) -> None:
    lab = served
    assert health(lab) == "200"
    models = json.loads(lab.ssh("node1", f"curl -s http://{HEAD}:8000/v1/models"))
    assert [m["id"] for m in models["data"]] == [MODEL]
    reply = lab.ssh(
        "node1",
        f"curl -s http://{HEAD}:8000/v1/completions -H 'Content-Type: application/json' "
        '-d \'{"prompt": "ping"}\'',
    )
    assert "stand-in" in json.loads(reply)["choices"][0]["text"]
    # bound to the data address only (listen: data): not on the management address
    assert health(lab, "http://10.99.1.2:8000") == "000"


def management_address(name: str) -> str:
    return cli.node_address(cli.load_state(), name)


def http_status(url: str, key: str = "") -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as error:
        return error.code


RAY_PROBES = {"node1": (6379, 6380, 6381), "node2": (6380, 6381)}


def assert_ray_closed_from_here(lab: Lab) -> None:
    """Ray's pinned ports do not connect from the management side, although Ray listens on
    every address there: the firewall keeps them out, not the binding."""
    assert "*:6379" in lab.ssh("node1", "ss -Htln '( sport = :6379 )'")
    for name, ports in RAY_PROBES.items():
        address = management_address(name)
        assert connects(address, 22), f"{name}: SSH does not connect: the probe itself is broken"
        assert [p for p in ports if connects(address, p)] == [], f"{name}: Ray reachable"


def test_management_side_reaches_neither_ray_nor_vllm(served: Lab) -> None:
    assert_ray_closed_from_here(served)
    assert not connects(management_address("node1"), 8000)
    zones = served.ssh("node1", "firewall-cmd --get-active-zones")
    assert "trusted\n  interfaces: enp1s0f0np0" in zones, zones


def test_listen_all_opens_vllm_only_and_listen_data_closes_it(serving: Lab) -> None:
    lab, head = serving, management_address("node1")
    key = cli.LAB_DIR / "api-key"
    key.write_text("sk-lab-test\n")
    lab.ensure_converged(SERVE + f"  listen: all\n  api_key_file: {key}\n")
    assert http_status(f"http://{head}:8000/health") == 200
    assert http_status(f"http://{head}:8000/v1/models") == 401
    assert http_status(f"http://{head}:8000/v1/models", "sk-lab-test") == 200
    # the fence of /metrics (docs/roles/metrics.md): the management side only with the key,
    # the data side (the head's own Prometheus, a worker) without it
    for path in ("/metrics", "/metrics/"):
        assert http_status(f"http://{head}:8000{path}") == 403
    assert http_status(f"http://{head}:8000/metrics", "sk-wrong") == 403
    assert http_status(f"http://{head}:8000/metrics", "sk-lab-test") == 200
    data_side = f"curl -s -o /dev/null -w '%{{http_code}}' http://{HEAD}:8000/metrics"
    assert [lab.ssh(name, data_side).strip() for name in ("node1", "node2")] == ["200", "200"]
    # the head's Prometheus (lab/serve.yml: metrics on) scrapes the fenced vLLM: a scrape after
    # the fence is up (a refused one is up == 0)
    fenced_at = time.time()
    scraped = f'timestamp(up{{job="vllm"}} == 1) > {fenced_at:.0f}'
    # 30 s: 15 of the lab's 2 s scrape intervals (lab/serve.yml)
    until(lambda: answers(lab, [scraped], PROMETHEUS_PORT)[0], 30, f"{scraped}: a vLLM scrape")
    recorded = json.loads(
        user(lab, "node1", "podman exec halo-vllm cat /tmp/halo-standin-vllm.json")
    )
    assert "--middleware=halo_metrics_fence.MetricsFence" in recorded["argv"]
    assert_ray_closed_from_here(lab)
    assert not connects(management_address("node2"), 8000)
    lab.ensure_converged(SERVE)
    wait_serving(lab)
    assert not connects(head, 8000)
    fence = "~vllm/.config/halo-cluster/python/halo_metrics_fence.py"
    lab.ssh(
        "node1",
        f"test ! -e {fence} && ! grep -q middleware ~vllm/.config/halo-cluster/vllm-start.sh",
    )
    services = lab.ssh("node1", "firewall-cmd --permanent --zone=public --list-services")
    assert "halo-vllm" not in services
    lab.ssh("node1", "test ! -e /etc/firewalld/services/halo-vllm.xml")


def test_ray_refuses_a_client_without_the_token(served: Lab) -> None:
    lab = served
    for name in lab.nodes:
        mode = lab.ssh(name, "stat -c '%a %U' ~vllm/.config/halo-cluster/ray-token").strip()
        assert mode == "600 vllm", f"{name}: ray-token is {mode}"
    anonymous = "env -u RAY_AUTH_MODE -u RAY_AUTH_TOKEN_PATH HOME=/nonexistent timeout 60"
    answer = user(lab, "node1", f"podman exec halo-ray {anonymous} ray status 2>&1", check=False)
    assert "InvalidAuthToken" in answer, answer[-2000:]
    assert "node_" in user(lab, "node1", "podman exec halo-ray ray status")


def test_ray_runs_on_both_nodes_as_the_cluster_user_at_the_data_addresses(served: Lab) -> None:
    lab = served
    status = user(lab, "node1", "podman exec halo-ray ray status")
    assert status.split("Pending:")[0].count(" node_") == 2, status
    assert "/2.0 GPU" in status
    for index, name in enumerate(lab.nodes, start=1):
        raylets = lab.ssh(name, "ps -eo user:20,args | grep '[r]aylet/raylet'")
        assert raylets.split()[0] == "vllm", raylets
        assert f"--node_ip_address=192.168.100.{index}" in raylets
    recorded = json.loads(
        user(lab, "node1", "podman exec halo-vllm cat /tmp/halo-standin-vllm.json")
    )
    argv, env = recorded["argv"], recorded["env"]
    assert argv[:3] == ["vllm", "serve", MODEL]
    for arg in (
        f"--host={HEAD}",
        "--tensor-parallel-size=2",
        "--distributed-executor-backend=ray",
        "--max-model-len=2048",
        "--enforce-eager",
    ):
        assert arg in argv
    assert env["VLLM_HOST_IP"] == HEAD and env["NCCL_SOCKET_IFNAME"] == "enp1s0f0np0"
    # lab/serve.yml: `transport: sockets` (no RDMA device in the lab), chosen, not a fallback
    assert env["NCCL_NET"] == "Socket" and env["NCCL_IB_DISABLE"] == "1"
    assert env["RAY_ADDRESS"] == f"{HEAD}:6379"
    # vllm-engine.env (roles/serve/enginestart.py): lab/serve.yml's ready_timeout 300 is below
    # vLLM's own 600 s, which stays
    assert env["VLLM_ENGINE_READY_TIMEOUT_S"] == "600"


def test_rerun_changes_nothing(served: Lab) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "halo_cluster.tools.drift", "--json-out", "/dev/null"],
        cwd=ROOT,
        env={
            **cli.os.environ,
            "CLUSTER_CONFIG": str(served.config("reboot: if-needed\n" + SERVE)),
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    again = served.deploy("--json", config=served.config("reboot: if-needed\n" + SERVE))
    assert changed_hosts(json.loads(again.stdout)) == {}
    assert f"serving {MODEL} at http://{HEAD}:8000" in again.stderr


def test_both_nodes_rebooted_serve_again_with_no_deploy(serving: Lab) -> None:
    lab = serving
    reboots = [
        subprocess.Popen([sys.executable, "-m", "lab", "reboot", name], cwd=ROOT)
        for name in lab.nodes
    ]
    assert all(process.wait(timeout=300) == 0 for process in reboots)
    seconds = wait_serving(lab)
    print(f"serving again {seconds:.1f} s after both nodes booted")


def warmups(lab: Lab) -> list[dict]:
    """The head's `warmup` history lines (roles/serve/warmup.py)."""
    lines = lab.ssh("node1", f"cat ~vllm/{HISTORY} 2>/dev/null || true").splitlines()
    return [json.loads(line) for line in lines if '"event":"warmup"' in line]


def test_every_start_of_vllm_is_warmed_up(serving: Lab) -> None:
    """A start of the head's vLLM that no deploy made (by hand here; systemd's Restart=always,
    the watchdog's restart and a boot start the unit alike) is followed by the warm-up: one
    `warmup` line of the served model in the head's history, answered, with its seconds."""
    lab = serving
    before = len(warmups(lab))
    user(lab, "node1", "systemctl --user restart halo-vllm")
    wait_serving(lab)
    until(lambda: len(warmups(lab)) > before, 120, lambda: journal(lab, "halo-warmup")[-2000:])
    (line,) = warmups(lab)[before:]
    assert (line["model"], line["ok"], line["run"]) == (MODEL, True, "warmup"), line
    assert 0 <= line["seconds"] < 60
    state = user(lab, "node1", "systemctl --user is-active halo-warmup", check=False)
    assert state.strip() == "inactive", state  # a oneshot that ended with 0, not failed


def test_heals_itself_from_each_fault_with_no_deploy(serving: Lab) -> None:
    """A crash of each part, as on a real machine: vLLM restarts and serves again by itself
    (the times are bench/serve.py's to report; here each must only come back)."""
    for fault in faults.FAULTS:
        seconds = faults.recover(fault)
        print(f"{fault}: serving again after {seconds:.0f} s")


def test_vllm_meets_its_contracts_with_ray_and_the_image(served: Lab) -> None:
    """What the stand-in recorded as vLLM 0.33 would see it: the same-node rendezvous through the
    shared VLLM_RPC_BASE_PATH, the model resolved by the real huggingface_hub on every rank's
    node, the image's profile.d in vLLM's and in Ray's workers' environment, no usage stats."""
    record = json.loads(
        user(served, "node1", "podman exec halo-vllm cat /tmp/halo-standin-vllm.json")
    )
    meeting = record["rendezvous"]
    assert meeting["driver_socket"].startswith("/run/halo-cluster/vllm-rpc/")
    assert meeting["worker_socket"].startswith("/run/halo-cluster/vllm-rpc/")
    assert sorted(rank["node_ip"] for rank in record["ranks"]) == [HEAD, "192.168.100.2"]
    for rank in record["ranks"]:
        assert rank["model"].endswith(f"/snapshots/{hub.COMMIT}"), rank
        assert rank["env"]["HALO_LAB_IMAGE_PROFILE"] == "read", rank
    assert record["env"]["HALO_LAB_IMAGE_PROFILE"] == "read"
    assert record["env"]["TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL"] == "1"
    assert record["env"]["VLLM_NO_USAGE_STATS"] == "1"
    # the raylet of the worker, where no vLLM runs, has the image's login environment itself
    environ = served.ssh(
        "node2", "tr '\\0' '\\n' < /proc/$(pgrep -f '[r]aylet/raylet' | head -n1)/environ"
    )
    assert "HALO_LAB_IMAGE_PROFILE=read" in environ.splitlines()
    # the real `hf download`, as the deploy runs it, resolves the model from the node's cache
    snapshot = user(
        served,
        "node2",
        'sh -c \'podman run --rm --env-file="$HOME/.config/halo-cluster/serve.env" '
        '-v "$HOME/.cache/huggingface:/root/.cache/huggingface" '
        f"{IMAGE} hf download --quiet {MODEL}'",
    )
    assert snapshot.strip().endswith(f"/snapshots/{hub.COMMIT}"), snapshot
    assert "usage_stats" not in journal(served, "halo-vllm")


LEAK = (
    "import ray; ray.init(); "
    "pg = ray.util.placement_group([{'GPU': 1}], lifetime='detached', name='halo-test-leak'); "
    "ray.get(pg.ready(), timeout=60); print('reserved')"
)


def test_gpu_held_with_vllm_stopped_restarts_the_heads_ray_and_serves_again(
    serving: Lab,
) -> None:
    lab = serving
    user(lab, "node1", "systemctl --user stop halo-vllm")
    # a GPU reserved by something that outlives its driver, as Ray 2.60's leak does
    leak = f'py=$(sed -n \'1s/^#!//p\' "$(command -v ray)"); "$py" -c {shlex.quote(LEAK)}'
    held = user(lab, "node1", f"podman exec halo-ray sh -c {shlex.quote(leak)}")
    assert "reserved" in held
    ray_id = user(lab, "node1", "podman inspect -f '{{.Id}}' halo-ray")
    user(lab, "node1", "systemctl --user start --no-block halo-vllm")
    seconds = wait_serving(lab, timeout=300)
    assert "restarting the head's Ray to clear its placement groups" in journal(lab, "halo-vllm")
    assert user(lab, "node1", "podman inspect -f '{{.Id}}' halo-ray") != ray_id
    print(f"serving again {seconds:.0f} s after vLLM's start")


def test_changed_max_model_len_restarts_vllm_only(serving: Lab) -> None:
    lab = serving
    ray_ids = {n: user(lab, n, "podman inspect -f '{{.Id}}' halo-ray") for n in lab.nodes}
    changed = lab.config("reboot: if-needed\n" + SERVE.replace("2048", "1024"))
    result = lab.deploy("--json", config=changed)
    assert result.returncode == 0, result.stderr[-3000:]
    ops = changed_hosts(json.loads(result.stdout))
    assert ops["Cluster services | Restart halo-vllm"] == ["node1"]
    assert not any("halo-ray" in name for name in ops)
    assert {n: user(lab, n, "podman inspect -f '{{.Id}}' halo-ray") for n in lab.nodes} == ray_ids
    recorded = user(lab, "node1", "podman exec halo-vllm cat /tmp/halo-standin-vllm.json")
    assert "--max-model-len=1024" in json.loads(recorded)["argv"]


@pytest.mark.last  # after test_membership, on its lab: nodes 1-3 serve, node4 joins
def test_four_nodes_tp2_pp2_serve() -> None:
    lab = Lab(4, "roce").ensure_up()
    tp2_pp2 = "\nserve:\n  tensor_parallel_size: 2\n  pipeline_parallel_size: 2\n"
    # serving needs no reboot (the lab's kernel arguments change nothing for Ray): four fewer
    result = lab.deploy(config=lab.config(SERVE.replace("\nserve:\n", tp2_pp2, 1)))
    assert result.returncode == 0, result.stderr[-3000:]
    wait_serving(lab)
    status = user(lab, "node1", "podman exec halo-ray ray status")
    assert "/4.0 GPU" in status
    recorded = json.loads(
        user(lab, "node1", "podman exec halo-vllm cat /tmp/halo-standin-vllm.json")
    )
    assert "--pipeline-parallel-size=2" in recorded["argv"]
