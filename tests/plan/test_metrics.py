"""The metrics role planned against recorded nodes: node_exporter's drop-in on every node (its
data address only, the collectors), Prometheus' quadlet and config on the head (every target
on the data link, its image by digest, nothing secret in its command line), `listen: all`'s
password as a bcrypt hash in a 0600 file and the firewall's port, a converged cluster changing
nothing, and `metrics.enabled: false` taking it all away. prometheus.yml and web.yml are
checked by the real promtool (Debian's, lab/debs.py)."""

from __future__ import annotations

import base64
import re
import subprocess

import bcrypt
import pytest

from halo_cluster.config.loader import parse_cluster
from halo_cluster.node.image import ContainerImages
from halo_cluster.roles.metrics import textfile
from tests.plan.harness import Plan, given, plan
from tests.plan.helpers_metrics import (
    ALERTS,
    ALL,
    AUTHORIZATION,
    CONFIG,
    DROP_IN,
    ON,
    RUNNING,
    UNIT,
    WEB,
    metrics_plan,
)
from tests.plan.nodes import HOME, RESOLVED, serve_cluster, user_node
from tests.unit import helpers_promtool


def metrics_ops(result: Plan, node: str) -> list[str]:
    return [op.name for op in result.ops[node] if op.name.startswith("Metrics") and op.commands]


def converged_files(result: Plan, node: str) -> dict[str, tuple[str, str]]:
    ours = {DROP_IN, UNIT, CONFIG, WEB, ALERTS, AUTHORIZATION, *textfile.paths(None)}
    modes = {WEB: "600", AUTHORIZATION: "600", textfile.SCRIPT: "755"}
    found = {
        path: (text, modes.get(path, "644"))
        for path, text in result.uploads(node).items()
        if path in ours
    }
    found[textfile.SERIES] = ("", "644")  # the timer's output
    return found


def test_node_exporter_listens_on_each_nodes_data_address_with_the_collectors(tmp_path) -> None:
    result = metrics_plan(ON, tmp_path)
    for node, address in (("halo1", "192.168.100.1"), ("halo2", "192.168.100.2")):
        drop_in = result.uploads(node)[DROP_IN]
        start = re.search(r"^ExecStart=(/usr/bin/prometheus-node-exporter .*)$", drop_in, re.M)
        assert start, drop_in
        assert f"--web.listen-address={address}:9100" in start.group(1)
        for collector in ("drm", "hwmon", "infiniband", "netdev", "meminfo", "pressure"):
            assert f"--collector.{collector}" in start.group(1)
        assert "ExecStart=\n" in drop_in  # the package's own is reset
        assert "Metrics | Start node_exporter on the data address" in metrics_ops(result, node)
    assert UNIT not in result.uploads("halo2")  # Prometheus on the head only


def test_prometheus_scrapes_every_target_on_the_data_link(tmp_path) -> None:
    config = metrics_plan(ON, tmp_path).uploads("halo1")[CONFIG]
    assert "scrape_interval: 5s" in config and "scrape_timeout: 5s" in config
    for target in ("192.168.100.1:9100", "192.168.100.2:9100", "192.168.100.1:8000"):
        assert f'"{target}"' in config
    assert ":6385" not in config  # Ray exports no metrics (serve.env: docs/roles/metrics.md)
    assert "10.0.0." not in config  # nothing on the management side


def test_the_quadlet_runs_the_resolved_digest_with_nothing_secret_in_its_command(tmp_path) -> None:
    result = metrics_plan(ALL, tmp_path)
    unit = result.uploads("halo1")[UNIT]
    digest = RESOLVED
    assert f"Image=quay.io/prometheus/prometheus@{digest}\n" in unit
    assert f"# image: quay.io/prometheus/prometheus:v3.5.0 resolved to {digest}\n" in unit
    command = re.search(r"^Exec=(.*)$", unit, re.M).group(1)
    assert "--storage.tsdb.retention.time=15d" in command
    assert "--storage.tsdb.retention.size=10GB" in command
    assert "--web.listen-address=0.0.0.0:9090" in command
    assert "--web.config.file=/etc/prometheus/web.yml" in command
    assert "prometheus-secret" not in "\n".join(result.commands("halo1"))
    assert "prometheus-secret" not in unit


def test_listen_all_keeps_only_a_bcrypt_hash_in_a_0600_file(tmp_path) -> None:
    result = metrics_plan(ALL, tmp_path)
    web = result.uploads("halo1")[WEB]
    hashed = re.search(r"^  halo: (\S+)$", web, re.M).group(1)
    assert bcrypt.checkpw(b"prometheus-secret", hashed.encode())
    assert "prometheus-secret" not in web
    assert any(f"chmod 600 {HOME}/.config/halo-cluster/metrics/.web.yml" in c
               for c in result.commands("halo1"))  # fmt: skip


def test_listen_all_gives_the_heads_readers_the_header_in_a_0600_file_only(tmp_path) -> None:
    """status's live rows and the watchdog send it (their tests: tests/unit/test_status_live.py,
    tests/plan/test_watchdog.py); in no command line, and none with listen: data."""
    result = metrics_plan(ALL, tmp_path)
    header = result.uploads("halo1")[AUTHORIZATION]
    name, _, token = header.rstrip("\n").partition(": Basic ")
    assert name == "Authorization" and base64.b64decode(token) == b"halo:prometheus-secret"
    commands = "\n".join(result.commands("halo1"))
    assert f"chmod 600 {HOME}/.config/halo-cluster/.prometheus-authorization" in commands
    assert token not in commands and "prometheus-secret" not in commands
    assert AUTHORIZATION not in result.uploads("halo2")
    assert AUTHORIZATION not in metrics_plan(ON, tmp_path).uploads("halo1")
    again = metrics_plan(ON, tmp_path, files=converged_files(result, "halo1"))
    removed = next(c for c in again.commands("halo1") if c.startswith("rm -f /home"))
    assert removed == f"rm -f {WEB} {AUTHORIZATION}"  # listen: data again: both go


def test_listen_all_opens_prometheus_in_the_management_zone_on_the_head_only(tmp_path) -> None:
    result = metrics_plan(ALL, tmp_path)
    firewall = [op.name for op in result.ops["halo1"] if op.name.startswith("Firewall")]
    assert "Firewall | Open Prometheus's port in zone public" in firewall
    service = result.uploads("halo1")["/etc/firewalld/services/halo-prometheus.xml"]
    assert '<port protocol="tcp" port="9090"/>' in service
    assert not any("halo-prometheus" in c for c in result.commands("halo2"))
    data = metrics_plan(ON, tmp_path)
    assert not any("halo-prometheus" in c for c in data.commands("halo1") if "firewall" in c)


def test_listen_all_without_a_password_is_refused(tmp_path) -> None:
    import yaml

    text = "cluster_user: vllm\nmetrics: {enabled: true, listen: all}\nnodes:\n" + "".join(
        f"  - {{name: halo{i}, ssh: {{host: 10.0.0.1{i}}}, data: {{interface: auto}}}}\n"
        for i in (1, 2)
    )
    with pytest.raises(Exception, match=r"metrics\.password_file: required with metrics\.listen"):
        parse_cluster(yaml.safe_load(text), base_dir=tmp_path)


def test_a_converged_cluster_changes_nothing(tmp_path) -> None:
    first = metrics_plan(ALL, tmp_path)
    digest = RESOLVED
    images = [f"halo-prometheus quay.io/prometheus/prometheus@{digest} abc"]
    again = {}
    for node in ("halo1", "halo2"):
        answer = user_node(files=converged_files(first, node), metrics_units=RUNNING)
        answer[given(ContainerImages, user="vllm", containers=("halo-prometheus",))] = images
        again[node] = answer
    (tmp_path / "pw").write_text("prometheus-secret\n")
    cluster = serve_cluster(serve=", api_key_file: key", tmp_path=tmp_path, top=ALL)
    result = plan(cluster, again)
    assert metrics_ops(result, "halo1") == metrics_ops(result, "halo2") == []


def test_metrics_off_stops_and_removes_what_it_ran(tmp_path) -> None:
    first = metrics_plan(ON, tmp_path)
    result = metrics_plan("", tmp_path, files=converged_files(first, "halo1"))
    assert metrics_ops(result, "halo1") == [
        "Metrics | Stop node_exporter (metrics.enabled: false)",
        "Metrics | Stop and remove the node's own series (metrics off)",
        "Metrics | Stop and remove Prometheus' files (metrics off, or not wanted any more)",
    ]
    removed = next(c for c in result.commands("halo1") if c.startswith("rm -f /home"))
    assert UNIT in removed and CONFIG in removed and ALERTS in removed


def test_promtool_accepts_the_rendered_config_and_web_config(tmp_path) -> None:
    promtool = str(helpers_promtool.promtool())  # fails in CI without it, else skips saying why
    result = metrics_plan(ALL, tmp_path)
    folder = tmp_path / "etc-prometheus"
    folder.mkdir()
    for path, text in result.uploads("halo1").items():
        if path.startswith(f"{HOME}/.config/halo-cluster/metrics/"):
            name = path.rpartition("/")[2]
            (folder / name).write_text(text.replace("/etc/prometheus/", f"{folder}/"))
    checks = (("check", "config", str(folder / "prometheus.yml")),
              ("check", "web-config", str(folder / "web.yml")))  # fmt: skip
    for check in checks:
        done = subprocess.run([promtool, *check], capture_output=True, text=True)
        assert done.returncode == 0, f"promtool {' '.join(check)}: {done.stdout}{done.stderr}"


def test_with_serve_listen_all_vllm_is_still_read_on_the_data_address(tmp_path) -> None:
    """The fence of vLLM's /metrics (docs/roles/metrics.md): Prometheus reads it on the head's
    data address whatever serve.listen says, and the management side gets no metrics port of
    ours but Prometheus' own with its password; vLLM's port there is serve.listen's choice."""
    (tmp_path / "key").write_text("sk-test\n")
    (tmp_path / "pw").write_text("prometheus-secret\n")
    cluster = serve_cluster(serve=", listen: all, api_key_file: key", tmp_path=tmp_path, top=ALL)
    result = plan(cluster, {n.name: user_node() for n in cluster.nodes})
    config = result.uploads("halo1")[CONFIG]
    assert '"192.168.100.1:8000"' in config and "127.0.0.1" not in config
    opened = [c for c in result.commands("halo1") if "--add-service=" in c]
    assert sorted(re.search(r"--add-service=(\S+)", c).group(1) for c in opened) == [
        "halo-prometheus",
        "halo-vllm",
    ]
    assert not any("9100" in text for path, text in result.uploads("halo1").items()
                   if path.startswith("/etc/firewalld"))  # fmt: skip
