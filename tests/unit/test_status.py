"""`make status`: what it reads from a node and how it decides up, down or unreachable."""

from __future__ import annotations

from pathlib import Path

import yaml

from halo_cluster.config import lock as locks
from halo_cluster.config.docs import page
from halo_cluster.config.loader import parse_cluster
from halo_cluster.node import batch
from halo_cluster.node.image import parse_images
from halo_cluster.tools import jsonout
from halo_cluster.tools.commands import documents
from halo_cluster.tools.status import read, view
from tests.recorded import container_image_line, skopeo_digest
from tests.unit.helpers_bench import fake_ssh

CONFIG = (
    "cluster_user: vllm\nserve: {enabled: true, model: org/model}\nnodes:\n"
    "  - {name: a, ssh: {host: h1}, data: {interface: eth1}}\n"
    "  - {name: b, ssh: {host: h2}, data: {interface: eth1}}\n"
)
CLUSTER = parse_cluster(yaml.safe_load(CONFIG))
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# argv: -F CONFIG ALIAS sh -s (or -O exit ALIAS): node a answers its read, node b refuses
FAKE_SSH = """
if [ "$3" = -O ]; then exit 0; fi
case "$3" in *-b) echo "ssh: connect to host h2 port 22: Connection refused" >&2; exit 255;; esac
cat >/dev/null; cat "$ANSWER"
"""
# systemd's own property order: NRestarts (a Service property) before Id (a Unit property)
HEAD = {
    "units": """NRestarts=0
Id=halo-ray.service
ActiveState=active
StateChangeTimestamp=Mon 2026-11-30 08:49:47 UTC

NRestarts=3
Id=halo-vllm.service
ActiveState=failed
StateChangeTimestamp=Mon 2026-11-30 08:50:01 UTC
""",
    "errors": "halo-vllm ValueError: the number of required GPUs (2) exceeds the total number "
    "of available GPUs\n",
    "ray": '[["192.168.100.1", true, 1.0], ["192.168.100.2", false, 1.0]]\n',
    "health": "000",
    "models": "",
}


def answered(texts: dict[str, str]) -> dict[str, batch.Part]:
    """What a node's read gives for these outputs (none for the others), through the one batch
    format."""
    names = read.gather_commands(CLUSTER, CLUSTER.head)
    printed = batch.joined(batch.Part(0, texts.get(name, "").encode()) for name in names)
    return batch.sections(printed, names)


def test_sections_and_units() -> None:
    found = answered(HEAD)
    units = read.parse_units(found["units"].lines, found["errors"].filled)
    assert [(u.name, u.state, u.restarts) for u in units] == [
        ("halo-ray", "active", 0),
        ("halo-vllm", "failed", 3),
    ]
    assert units[1].error.startswith("ValueError: the number of required GPUs (2)")
    assert found["ray"].lines == ['[["192.168.100.1", true, 1.0], ["192.168.100.2", false, 1.0]]']


def recorded_show() -> list[str]:
    text = (FIXTURES / "systemctl-show-halo-units.txt").read_text()
    return [line for line in text.splitlines() if not line.startswith("#")]


def test_restarts_go_to_their_own_unit_in_systemds_order() -> None:
    found = answered({"units": "\n".join(recorded_show()) + "\n"})
    units = read.parse_units(found["units"].lines, found["errors"].filled)
    assert [(u.name, u.state, u.restarts, u.since) for u in units] == [
        ("halo-ray", "active", 0, "Mon 2026-11-30 08:49:47 UTC"),
        ("halo-vllm", "activating", 6, "Mon 2026-11-30 09:02:11 UTC"),
    ]


def test_units_missing_from_the_output_are_absent() -> None:
    # the user manager not running: systemctl prints nothing
    assert [(u.name, u.state) for u in read.parse_units([], [])] == [
        ("halo-ray", "absent"),
        ("halo-vllm", "absent"),
    ]


def test_down_when_a_worker_left_ray_and_vllm_failed() -> None:
    found = answered(HEAD)
    head = read.NodeStatus("a", "head", "192.168.100.1", ray="alive", gpus=1)
    head.units = read.parse_units(found["units"].lines, found["errors"].filled)
    head.vllm = read._vllm(CLUSTER, found)
    worker = read.NodeStatus("b", "worker", "192.168.100.2", ray="dead")
    worker.units = [read.Unit("halo-ray", "active")]
    assert read.exit_code(CLUSTER, [head, worker]) == read.DOWN
    text = view.table(CLUSTER, [head, worker])
    assert "a: halo-vllm failed: ValueError" in text
    assert "health no answer, no model, http://192.168.100.1:8000" in text


def test_up_and_unreachable() -> None:
    head = read.NodeStatus("a", "head", "192.168.100.1", ray="alive", gpus=1)
    head.units = [read.Unit("halo-ray", "active"), read.Unit("halo-vllm", "active")]
    head.vllm = {"health": 200, "models": ["org/model"], "url": "http://192.168.100.1:8000"}
    worker = read.NodeStatus("b", "worker", "192.168.100.2", ray="alive", gpus=1)
    worker.units = [read.Unit("halo-ray", "active")]
    assert read.exit_code(CLUSTER, [head, worker]) == read.UP
    gone = read.NodeStatus("b", "worker", "192.168.100.2", reachable=False)
    gone.vllm = {"error": ["ssh: connect to host h2 port 22: No route to host"]}
    assert read.exit_code(CLUSTER, [head, gone]) == read.UNREACHABLE


def test_the_read_never_prints_the_api_key() -> None:
    script = batch.named(read.gather_commands(CLUSTER, CLUSTER.head))
    assert "VLLM_API_KEY=//p" in script and "echo $key" not in script
    assert "podman exec halo-ray" in script
    worker = read.gather_commands(CLUSTER, CLUSTER.workers[0])
    assert "halo-ray" in worker["units"] and "ray" not in worker


def test_the_memory_budget_of_each_node_from_its_one_command() -> None:
    from tests.recorded import memory_output

    script = read.gather_commands(CLUSTER, CLUSTER.nodes[1])["memory"]
    assert "mem_info_gtt_total" in script
    assert "models--org--model" in script  # the model's snapshot in the user's cache
    lines = memory_output([35 * 10**9] * 8, virt="systemd-nspawn")
    found = answered({"memory": "\n".join(lines)})
    node = read.NodeStatus("b", "worker", "192.168.100.2")
    budget = read.node_budget(CLUSTER, CLUSTER.nodes[1], found["memory"].filled)
    node.memory = read.asdict(budget)
    text = view.memory_table([node])
    assert f"memory budget ({page('roles/serve.md')}):" in text
    assert "b: memory NOT VERIFIED: a container sees its host's MemTotal" in text
    assert "b: org/model: weights 130.4 GiB on this node (260.8 GiB / TP 2 x PP 1)" in text
    row = text.splitlines()[2].split()
    assert row[0] == "b" and row[-1] == "FAIL"


def test_each_nodes_kernel_and_firmware_from_its_one_command() -> None:
    """The versions section is the deploy's InstalledVersions read; the table says when the
    nodes differ (the recorded Fedora 43 host beside a Strix Halo on 6.18.5)."""
    from tests.recorded import recorded_fedora43_versions, strix_halo_versions, versions_output

    script = read.gather_commands(CLUSTER, CLUSTER.nodes[1])["versions"]
    assert "rpm -q --qf" in script and "uname -r" in script
    nodes = []
    for name, (running, nevras) in (
        ("a", strix_halo_versions()),
        ("b", recorded_fedora43_versions()),
    ):
        output = "\n".join(versions_output(running, nevras)) + "\n"
        found = answered({"versions": output})
        node = read.NodeStatus(name, "worker", "192.168.100.2")
        node.versions = dict(read.versions_process(found["versions"].filled))
        nodes.append(node)
    text = view.versions_table(nodes)
    assert text.splitlines() == [
        f"kernel and firmware ({page('roles/os.md')}):",
        "  a: kernel 6.18.5-200.fc43.x86_64 (kernel-core installed: 6.18.5-200.fc43), "
        "amd-gpu-firmware 20260110-1.fc43",
        "  b: kernel 6.17.8-300.fc43.x86_64 (kernel-core installed: 6.17.1-300.fc43, "
        "6.17.8-300.fc43), amd-gpu-firmware none",
        "  the nodes run different kernels or firmware: make them equal",
    ]
    assert view.versions_table(nodes[:1]).count("\n") == 1


def test_each_node_shows_its_digest_and_the_versions_in_it() -> None:
    digest = skopeo_digest()
    pinned = f"docker.io/kyuz0/vllm-therock-gfx1151@{digest}"
    lock = locks.Lock(
        "a", "docker.io/kyuz0/vllm-therock-gfx1151:latest", digest, "T", "2.60.0", "0.33.0"
    )
    recorded = container_image_line()  # a container made from a tag
    _, tag, image_id = recorded.split()
    lines = [f"halo-ray {pinned} {image_id}", f"halo-vllm {pinned} {image_id}"]
    images = {n: i["reference"] for n, i in parse_images(lines).items()}
    short = digest.removeprefix("sha256:")[:12]
    assert view.image_cell(images, lock) == f"{short} (ray 2.60.0, vllm 0.33.0)"
    other = "docker.io/kyuz0/vllm-therock-gfx1151@sha256:" + "ab" * 32
    assert view.image_cell({"halo-ray": other}, lock) == f"{'ab' * 6} (not the cluster's)"
    assert view.image_cell({"halo-ray": tag}, lock) == f"{tag} (not a digest)"
    assert view.image_cell({}, lock) == "no container"
    mixed = {"halo-ray": pinned, "halo-vllm": other}
    assert view.image_cell(mixed, lock) == f"{short} (its containers differ)"
    head = read.NodeStatus("a", "head", "192.168.100.1", ray="alive", gpus=1, images=images)
    head.vllm = {"health": 200, "models": ["org/model"], "url": "http://192.168.100.1:8000"}
    text = view.table(CLUSTER, [head], lock)
    assert text.splitlines()[0] == f"image: {lock.reference} is {digest} (resolved T)"
    assert f"{short} (ray 2.60.0, vllm 0.33.0)" in text
    script = read.gather_commands(CLUSTER, CLUSTER.head)["images"]
    assert "podman container inspect --format '{{.Name}} {{.ImageName}} {{.Image}}' halo-ray" in (
        script
    )


def test_collect_reads_every_node_through_the_transport_and_says_a_down_one(
    tmp_path, monkeypatch
) -> None:
    """The head answers its read (the one batch format), the worker's ssh is refused: the head's
    units, vLLM and Ray are read, the worker is its one line and the verdict is unreachable."""
    answer = tmp_path / "head"
    answer.write_bytes(
        batch.joined(
            batch.Part(0, HEAD.get(name, "").encode())
            for name in read.gather_commands(CLUSTER, CLUSTER.head)
        )
    )
    fake_ssh(tmp_path, monkeypatch, FAKE_SSH)
    monkeypatch.setenv("PATH", f"{tmp_path / 'fakebin'}:/usr/bin:/bin")
    monkeypatch.setenv("ANSWER", str(answer))
    head, worker = read.collect(CLUSTER)
    assert [(u.name, u.state) for u in head.units] == [
        ("halo-ray", "active"),
        ("halo-vllm", "failed"),
    ]
    assert (head.ray, head.gpus, head.vllm["health"]) == ("alive", 1.0, 0)
    assert not worker.reachable and worker.unreachable == (
        "b (h2:22): cannot be reached: refused "
        "(ssh: connect to host h2 port 22: Connection refused)"
    )
    assert read.as_json(worker)["gpus"] is None  # not read: null, never a number's "unknown"
    assert read.exit_code(CLUSTER, [head, worker]) == read.UNREACHABLE
    nodes = [read.as_json(head), read.as_json(worker)]
    found = jsonout.document("status", 1, serving=True, reason=None, nodes=nodes, left_out=[])
    assert documents.problems("status", found) == []
    assert documents.problems("status", found | {"nodes": [nodes[0] | {"units": "unknown"}]}) == [
        "nodes[].units: str, not list[object]|null"
    ]


def test_serving_off_reads_each_nodes_reach_image_and_versions(tmp_path, monkeypatch) -> None:
    """serve.enabled false: no services to read, but each node's reach, the image its
    containers run and its kernel and firmware are (issue 45 item 14), and nothing else."""
    from tests.recorded import strix_halo_versions, versions_output

    off = parse_cluster(yaml.safe_load(CONFIG.replace("enabled: true", "enabled: false")))
    names = read.gather_commands(off, off.head)
    assert list(names) == ["images", "versions"]
    _, tag, image_id = container_image_line().split()  # a container made from a tag
    recorded = f"halo-ray {tag} {image_id}"
    versions = "\n".join(versions_output(*strix_halo_versions())) + "\n"
    answer = tmp_path / "head"
    outputs = {"images": recorded + "\n", "versions": versions}
    answer.write_bytes(batch.joined(batch.Part(0, outputs[n].encode()) for n in names))
    fake_ssh(tmp_path, monkeypatch, FAKE_SSH)
    monkeypatch.setenv("PATH", f"{tmp_path / 'fakebin'}:/usr/bin:/bin")
    monkeypatch.setenv("ANSWER", str(answer))
    head, worker = read.collect(off)
    assert head.reachable and head.images == {"halo-ray": tag} and head.units == []
    assert head.versions["running"] == "6.18.5-200.fc43.x86_64"
    assert not worker.reachable and view.off_code([head, worker]) == read.UNREACHABLE
    assert view.off_code([head]) == read.DOWN
    table = view.off_table([head, worker], None).splitlines()
    assert table == [table[0], f"a     head  {head.address}  {tag} (not a digest)"]
    nodes = [read.as_json(head), read.as_json(worker)]
    found = jsonout.document("status", 1, serving=False, reason="off", nodes=nodes, left_out=[])
    assert documents.problems("status", found) == []
