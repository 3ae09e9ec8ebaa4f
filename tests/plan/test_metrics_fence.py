"""The fence of vLLM's /metrics planned (roles/serve/metricsfence.py, docs/roles/metrics.md):
with `serve.listen: all` the node serving the API (the head, with either launcher) gets
`--middleware`, the fence's file mounted read-only into its container and its folder on
PYTHONPATH with the data link's subnet; with `listen: data` none of it, so a cluster that keeps
`data` plans no change; a switch back to `data` removes the file and restarts vLLM."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from halo_cluster.roles.serve import flags, metricsfence
from tests.plan.harness import plan
from tests.plan.nodes import CONFIG, HOME, converged, plan_cluster, serve_cluster

UNITS = f"{HOME}/.config/containers/systemd"
FENCE = f"{CONFIG}/python/halo_metrics_fence.py"
MIDDLEWARE = "--middleware=halo_metrics_fence.MetricsFence"
ALL = ", listen: all, api_key_file: key"
FENCE_PATH = "/usr/local/lib/halo-cluster/python/halo_metrics_fence.py"  # in vLLM's container


def listening_all(tmp_path: Path, launcher: str = ""):
    (tmp_path / "key").write_text("sk-fence-test\n")
    return serve_cluster(serve=launcher + ALL, tmp_path=tmp_path)


@pytest.mark.parametrize("launcher", ["", ", launcher: native"])
def test_listen_all_fences_the_heads_metrics(tmp_path, launcher: str) -> None:
    result = plan_cluster(listening_all(tmp_path, launcher))
    head = result.uploads("halo1")
    assert head[FENCE] == Path(metricsfence.__file__).read_text()
    assert flags.FENCE_CLASS.split(".") == [Path(FENCE).stem, metricsfence.MetricsFence.__name__]
    start = head[f"{CONFIG}/vllm-start.sh"]
    assert MIDDLEWARE in start
    assert (
        "export PYTHONPATH=/usr/local/lib/halo-cluster/python${PYTHONPATH:+:$PYTHONPATH}" in start
    )
    # the data link's subnet of the plan's nodes (192.168.100.1/30 and .2)
    assert f"export {metricsfence.NETWORKS}=192.168.100.0/30\n" in start
    # after the image's login environment, which would otherwise set PYTHONPATH over it
    assert start.index("export PYTHONPATH=") > start.index("/etc/profile")
    unit = head[f"{UNITS}/halo-vllm.container"]
    mount = f"Volume=%h/.config/halo-cluster/python/halo_metrics_fence.py:{FENCE_PATH}:ro"
    assert mount in unit
    # a worker serves no API: neither the file nor the flag (a headless rank, or Ray's worker)
    worker = result.uploads("halo2")
    assert FENCE not in worker
    assert not any(MIDDLEWARE in text or "halo_metrics_fence" in text for text in worker.values())


def test_the_start_script_puts_the_fence_first_and_keeps_the_images_path(tmp_path) -> None:
    """The two export lines as the container's shell runs them: the fence's folder first, an
    image's own PYTHONPATH after it, and none added when the image has none."""
    start = plan_cluster(listening_all(tmp_path)).uploads("halo1")[f"{CONFIG}/vllm-start.sh"]
    lines = "\n".join(line for line in start.splitlines() if line.startswith("export "))
    script = lines + f'\nprintf "%s|%s" "$PYTHONPATH" "${metricsfence.NETWORKS}"'
    for image, expected in (("", ""), ("/opt/image", ":/opt/image")):
        env = {"PATH": "/usr/bin:/bin", **({"PYTHONPATH": image} if image else {})}
        done = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True)
        assert done.stdout == f"/usr/local/lib/halo-cluster/python{expected}|192.168.100.0/30"


@pytest.mark.parametrize("launcher", ["", ", launcher: native"])
def test_listen_data_renders_no_fence(launcher: str) -> None:
    result = plan_cluster(serve_cluster(serve=launcher))
    for name in ("halo1", "halo2"):
        files = result.uploads(name)
        assert FENCE not in files
        assert not any("halo_metrics_fence" in t or "--middleware" in t for t in files.values())
        assert not any("PYTHONPATH" in text for text in files.values())


def test_back_to_listen_data_removes_the_fence_and_restarts_vllm(tmp_path) -> None:
    fenced = listening_all(tmp_path)
    nodes = {n.name: converged(fenced, n.name) for n in fenced.nodes}
    result = plan(serve_cluster(), nodes)
    removed = [c for c in result.commands("halo1") if FENCE in c and "rm -f" in c]
    assert removed, result.commands("halo1")
    assert "Cluster services | Restart halo-vllm" in result.names("halo1")


def test_a_converged_fenced_head_plans_no_change(tmp_path) -> None:
    fenced = listening_all(tmp_path)
    nodes = {n.name: converged(fenced, n.name) for n in fenced.nodes}
    result = plan(fenced, nodes)
    assert not any(FENCE in path for path in result.uploads("halo1"))
    assert "Cluster services | Restart halo-vllm" not in result.names("halo1")


def test_the_middleware_flag_is_owned() -> None:
    assert flags.owned_flag("--middleware=my.Mod") == "serve.listen"
