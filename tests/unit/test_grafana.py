"""Grafana's files as halo-cluster writes them, checked without Grafana (no package or image of it
here; its live run is NOT VERIFIED): the provisioning files against the fields Grafana's reader
takes (grafana/grafana pkg/services/provisioning/datasources/types.go `upsertDataSourceFromConfigV1`
and config_reader.go; pkg/services/provisioning/dashboards/types.go `configs`, config_reader.go),
every dashboard against what file provisioning requires of one (a title: types.go's
ErrDashboardTitleEmpty; a uid; panels with unique ids, a gridPos and, unless a row, targets with
a refId and an expr), every query's metric names against the declared names (vLLM 0.33.0's,
node_exporter's: roles/metrics/queries.py), and the quadlet: its password only through a file."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from halo_cluster.roles.metrics import grafana, queries
from halo_cluster.roles.metrics.schema import DEFAULT_GRAFANA_IMAGE
from lab.standin import vllm_metrics as standin
from tests.e2e.lab_metrics import STANDIN_UNSERVED
from tests.unit.helpers_promtool import run

# upsertDataSourceFromConfigV1's yaml tags, and configsV1's
DATASOURCE_FIELDS = {
    "orgId", "orgName", "version", "name", "type", "access", "url", "user", "database",
    "basicAuth", "basicAuthUser", "withCredentials", "isDefault", "correlations", "jsonData",
    "secureJsonData", "editable", "uid",
}  # fmt: skip
DATASOURCES_FILE = {"apiVersion", "datasources", "deleteDatasources"}
# dashboards' configs (configV1's providers)
PROVIDER_FIELDS = {
    "name", "type", "orgId", "folder", "folderUid", "editable", "options", "disableDeletion",
    "updateIntervalSeconds", "allowUiUpdates",
}  # fmt: skip
PROVIDERS_FILE = {"apiVersion", "providers"}
UPSTREAM = {"vllm-performance-statistics.json", "vllm-query-statistics.json"}


def datasource(user: str | None) -> dict[str, Any]:
    text = grafana.render(
        "grafana/datasource.yml.j2",
        uid=grafana.DATASOURCE_UID,
        url="http://192.168.100.1:9090",
        user=user,
        password_file=f"{grafana.SECRETS}/prometheus-password",
    )
    return yaml.safe_load(text)


@pytest.mark.parametrize("user", [None, "halo"])
def test_the_datasource_file_has_only_grafanas_fields(user: str | None) -> None:
    found = datasource(user)
    assert set(found) <= DATASOURCES_FILE and found["apiVersion"] == 1
    (source,) = found["datasources"]
    assert set(source) <= DATASOURCE_FIELDS
    assert source["type"] == "prometheus" and source["access"] in ("proxy", "direct")
    assert source["uid"] == grafana.DATASOURCE_UID and source["isDefault"] is True
    if user:
        # Grafana reads the password from the file: the provisioning file holds none
        assert source["basicAuthUser"] == user
        assert source["secureJsonData"] == {
            "basicAuthPassword": f"$__file{{{grafana.SECRETS}/prometheus-password}}"
        }
    else:
        assert "basicAuth" not in source and "secureJsonData" not in source


def test_the_dashboards_provider_has_only_grafanas_fields() -> None:
    found = yaml.safe_load(grafana.render("grafana/dashboards.yml.j2", path=grafana.DASHBOARDS))
    assert set(found) <= PROVIDERS_FILE and found["apiVersion"] == 1
    (provider,) = found["providers"]
    assert set(provider) <= PROVIDER_FIELDS
    assert provider["type"] == "file" and provider["options"] == {"path": grafana.DASHBOARDS}


def test_the_dashboards_are_the_clusters_and_vllms() -> None:
    assert set(queries.dashboards()) == {"halo-cluster.json", *UPSTREAM}


@pytest.mark.parametrize("name", sorted(queries.dashboards()))
def test_every_dashboard_is_one_grafana_provisions(name: str) -> None:
    dashboard = json.loads(queries.dashboards()[name])
    assert dashboard["title"] and dashboard["uid"] and len(dashboard["uid"]) <= 40
    assert isinstance(dashboard["schemaVersion"], int)
    panels = queries.panels(dashboard)
    assert len({p["id"] for p in panels}) == len(panels), "panel ids repeat"
    for panel in panels:
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"]), panel["title"]
        if panel["type"] != "row":
            assert panel["targets"], panel["title"]
            assert all(t["refId"] and t["expr"] for t in panel["targets"]), panel["title"]


def test_the_dashboards_uids_differ() -> None:
    uids = [json.loads(text)["uid"] for text in queries.dashboards().values()]
    assert len(set(uids)) == len(uids)


def test_every_panel_reads_the_provisioned_datasource() -> None:
    """The cluster's dashboard names the data source's uid; vLLM's pick it through their
    DS_PROMETHEUS variable (any Prometheus data source, the default one first)."""
    for name, text in queries.dashboards().items():
        dashboard = json.loads(text)
        uids = {p["datasource"]["uid"] for p in queries.panels(dashboard) if "datasource" in p}
        if name in UPSTREAM:
            assert uids == {"${DS_PROMETHEUS}"}
            (variable,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
            assert variable["name"] == "DS_PROMETHEUS" and variable["query"] == "prometheus"
        else:
            assert uids == {grafana.DATASOURCE_UID}


def variable_metrics(text: str) -> set[str]:
    """The metrics the dashboard's variables list their values from (`label_values(M, l)`)."""
    found = re.findall(r"label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)", text)
    return set(found)


def test_every_query_reads_declared_metric_names() -> None:
    """vLLM's dashboards and the cluster's read only names vLLM 0.33.0 exposes (an older copy
    of vLLM's query_statistics.json read `vllm_...` names, which match nothing), node_exporter
    and the metrics role's own series; the alerts too."""
    wrong = {
        f"{q.source}: {q.title}: {name}"
        for q in queries.dashboard_queries() + queries.alert_queries()
        for name in queries.metric_names(q.expr) - queries.declared()
    }
    for name, text in queries.dashboards().items():
        wrong |= {f"{name}: a variable: {m}" for m in variable_metrics(text) - queries.declared()}
    assert wrong == set()


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('rate(vllm:generation_tokens_total{model_name=~"$model"}[$__rate_interval])',
         {"vllm:generation_tokens_total"}),
        ("histogram_quantile(0.99, sum by(le) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))",
         {"vllm:e2e_request_latency_seconds_bucket"}),
        ('up{job="vllm"} == 1 unless on (instance) vllm:num_requests_running',
         {"up", "vllm:num_requests_running"}),
        ("node_memory_MemAvailable_bytes < 4 * 1024^3 or vector(1e9)",
         {"node_memory_MemAvailable_bytes"}),
    ],
)  # fmt: skip
def test_metric_names_are_read_from_an_expression(expr: str, names: set[str]) -> None:
    assert queries.metric_names(expr) == names


def test_the_quadlet_passes_the_password_as_a_file_and_pins_the_digest() -> None:
    image = "docker.io/grafana/grafana@sha256:" + "a" * 64
    unit = grafana.render(
        "halo-grafana.container.j2",
        node="node1",
        user="vllm",
        image=image,
        reference=DEFAULT_GRAFANA_IMAGE,
        digest="sha256:" + "a" * 64,
        folder=grafana.FOLDER,
        data=grafana.DATA,
        dashboards=grafana.DASHBOARDS,
        secrets=grafana.SECRETS,
        address="192.168.100.1",
        port=grafana.PORT,
    )
    assert f"Image={image}\n" in unit
    assert f"GF_SECURITY_ADMIN_PASSWORD__FILE={grafana.SECRETS}/admin-password\n" in unit
    assert "GF_SECURITY_ADMIN_PASSWORD=" not in unit and "Exec=" not in unit
    assert "GF_SERVER_HTTP_ADDR=192.168.100.1\n" in unit
    secrets = {path for path, mode, secret in grafana.files().values() if secret}
    assert {mode for _, mode, secret in grafana.files().values() if secret} == {"600"}
    assert secrets == {f"{grafana.FOLDER}/secrets/admin-password",
                       f"{grafana.FOLDER}/secrets/prometheus-password"}  # fmt: skip


def standin_names() -> set[str]:
    """Every series name the lab's stand-in vLLM serves (lab/standin/vllm_metrics.py)."""
    kinds = {name: kind for name, (kind, _) in standin.SCALARS.items()}
    kinds |= {standin.SUCCESS[0]: "counter", standin.INFO[0]: "gauge"}
    kinds |= dict.fromkeys([*standin.HISTOGRAMS, *standin.REQUEST_TOKENS], "histogram")
    suffixes = {"gauge": ("",), "counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
    return {name + suffix for name, kind in kinds.items() for suffix in suffixes[kind]}


def test_the_standin_serves_vllms_names_and_every_one_the_dashboards_read() -> None:
    """The stand-in's names are vLLM 0.33.0's, and every vLLM name the dashboards and alerts
    read is one of them (what it lacks the lab test would expect empty:
    tests/e2e/lab_metrics.py)."""
    assert standin_names() <= queries.vllm_names()
    read = {
        name
        for q in queries.dashboard_queries() + queries.alert_queries()
        for name in queries.metric_names(q.expr)
        if name in queries.vllm_names()
    }
    assert read - standin_names() == STANDIN_UNSERVED


def test_every_panel_query_is_promql_promtool_parses(tmp_path) -> None:
    """Each panel's query, Grafana's variables given values, as a recording rule: `promtool
    check rules` parses it with Prometheus' own parser (a query Prometheus refuses would be a
    panel that never draws)."""
    found = queries.dashboard_queries()
    rules = [{"record": f"halo:panel_{i}", "expr": q.concrete()} for i, q in enumerate(found)]
    (tmp_path / "panels.yml").write_text(
        yaml.safe_dump({"groups": [{"name": "p", "rules": rules}]})
    )
    done = run("check", "rules", "panels.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(found)} rules found" in done.stdout
