"""Grafana planned against recorded nodes (`metrics.grafana`): on the head only, its quadlet on
the resolved digest with the admin password through a 0600 file (never in a command or the
unit), the data source and the three dashboards; Prometheus' password for the data source with
`metrics.listen: all`; refused without a password file; taken away when turned off."""

from __future__ import annotations

import pytest
import yaml

from halo_cluster.config.loader import parse_cluster
from halo_cluster.roles.metrics import grafana
from halo_cluster.roles.metrics.queries import dashboards
from tests.plan.harness import Plan, plan
from tests.plan.nodes import HOME, RESOLVED, serve_cluster, user_node

UNIT = f"{HOME}/.config/containers/systemd/halo-grafana.container"
FOLDER = f"{HOME}/{grafana.FOLDER}"
ADMIN = f"{FOLDER}/secrets/admin-password"
PROMETHEUS_PASSWORD = f"{FOLDER}/secrets/prometheus-password"
DATASOURCE = f"{FOLDER}/datasources/prometheus.yml"
ON = "metrics: {enabled: true, grafana: true, grafana_password_file: gpw}\n"
ALL = (
    "metrics: {enabled: true, grafana: true, grafana_password_file: gpw, listen: all, "
    "password_file: pw}\n"
)


def grafana_plan(top: str, tmp_path, files=None) -> Plan:
    (tmp_path / "key").write_text("sk-test\n")
    (tmp_path / "pw").write_text("prometheus-secret\n")
    (tmp_path / "gpw").write_text("grafana-secret\n")
    cluster = serve_cluster(serve=", api_key_file: key", tmp_path=tmp_path, top=top)
    nodes = {n.name: user_node(files=dict(files or {})) for n in cluster.nodes}
    return plan(cluster, nodes)


def test_grafana_runs_on_the_head_with_its_password_in_a_0600_file_only(tmp_path) -> None:
    result = grafana_plan(ON, tmp_path)
    uploads = result.uploads("halo1")
    unit = uploads[UNIT]
    assert f"Image=docker.io/grafana/grafana@{RESOLVED}\n" in unit
    assert "GF_SERVER_HTTP_ADDR=192.168.100.1\n" in unit
    assert f"GF_SECURITY_ADMIN_PASSWORD__FILE={grafana.SECRETS}/admin-password\n" in unit
    assert uploads[ADMIN] == "grafana-secret\n"
    commands = "\n".join(result.commands("halo1"))
    assert "grafana-secret" not in commands and "grafana-secret" not in unit
    assert f"chmod 600 {FOLDER}/secrets/.admin-password" in commands
    for name, text in dashboards().items():
        assert uploads[f"{FOLDER}/dashboards/{name}"] == text
    source = yaml.safe_load(uploads[DATASOURCE])["datasources"][0]
    assert source["url"] == "http://192.168.100.1:9090" and "basicAuth" not in source
    assert PROMETHEUS_PASSWORD not in uploads
    assert not any(path.startswith(FOLDER) or path == UNIT for path in result.uploads("halo2"))


def test_listen_all_gives_the_data_source_prometheus_password_by_file(tmp_path) -> None:
    uploads = grafana_plan(ALL, tmp_path).uploads("halo1")
    source = yaml.safe_load(uploads[DATASOURCE])["datasources"][0]
    assert source["basicAuth"] is True and source["basicAuthUser"] == "halo"
    assert "prometheus-secret" not in uploads[DATASOURCE]
    assert uploads[PROMETHEUS_PASSWORD] == "prometheus-secret\n"
    assert "GF_SERVER_HTTP_ADDR=192.168.100.1\n" in uploads[UNIT]  # the data address still


def test_grafana_without_a_password_file_is_refused(tmp_path) -> None:
    text = "cluster_user: vllm\nmetrics: {enabled: true, grafana: true}\nnodes:\n" + "".join(
        f"  - {{name: halo{i}, ssh: {{host: 10.0.0.1{i}}}, data: {{interface: auto}}}}\n"
        for i in (1, 2)
    )
    with pytest.raises(Exception, match=r"metrics\.grafana_password_file: required with"):
        parse_cluster(yaml.safe_load(text), base_dir=tmp_path)


def test_grafana_off_removes_its_files(tmp_path) -> None:
    first = grafana_plan(ON, tmp_path).uploads("halo1")
    ours = {path: (text, "644") for path, text in first.items() if path.startswith(FOLDER)}
    ours[UNIT] = (first[UNIT], "644")
    result = grafana_plan("metrics: {enabled: true}\n", tmp_path, files=ours)
    removed = next(c for c in result.commands("halo1") if c.startswith("rm -f /home"))
    assert UNIT in removed and ADMIN in removed and DATASOURCE in removed
