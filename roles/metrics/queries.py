"""Every PromQL query the cluster ships: each dashboard panel's (templates/metrics/grafana/
dashboards/) and each alert rule's (alerts.py), with the metric names each reads; and the metric
names they may read, declared once: vLLM's (0.33.0, vllm/v1/metrics/loggers.py, as
prometheus_client exposes them), node_exporter's, the metrics role's own textfile series and
Prometheus' own. A lab test asks the lab's Prometheus for every query and names the panel that
answers nothing; a unit test checks every name against the declared ones."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import yaml

from halo_cluster.node.render import PACKAGE
from halo_cluster.roles.metrics import alerts, textseries

SOURCE = "grafana/dashboards"  # below templates/metrics/

# vLLM 0.33.0's core families (PrometheusStatLogger), by the name registered: a counter is
# exposed as NAME_total, a histogram as NAME_bucket, NAME_sum and NAME_count
VLLM_FAMILIES = {
    "gauge": (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:num_requests_waiting_by_reason",
        "vllm:kv_cache_usage_perc",
        "vllm:engine_sleep_state",
        "vllm:cache_config_info",
        "vllm:lora_requests_info",
    ),
    "counter": (
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
        "vllm:num_preemptions",
        "vllm:prompt_tokens_by_source",
        "vllm:prompt_tokens_cached",
        "vllm:prefix_cache_queries",
        "vllm:prefix_cache_hits",
        "vllm:request_success",
        "vllm:admission_rejections",
    ),
    "histogram": (
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:request_time_per_output_token_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:request_inference_time_seconds",
        "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds",
        "vllm:iteration_tokens_total",
        "vllm:request_prompt_tokens",
        "vllm:request_generation_tokens",
        "vllm:request_max_num_generation_tokens",
        "vllm:request_params_n",
        "vllm:request_params_max_tokens",
    ),
}
# node_exporter's (collectors drm, hwmon, infiniband, netclass, meminfo, pressure, uname, dmi,
# textfile)
NODE_EXPORTER = frozenset(
    {
        "node_drm_gpu_busy_percent",
        "node_drm_memory_gtt_used_bytes",
        "node_drm_memory_gtt_size_bytes",
        "node_hwmon_temp_celsius",
        "node_hwmon_power_watt",
        "node_hwmon_power_average_watt",
        "node_infiniband_info",
        "node_infiniband_state_id",
        "node_infiniband_physical_state_id",
        "node_infiniband_rate_bytes_per_second",
        "node_infiniband_port_data_received_bytes_total",
        "node_infiniband_port_data_transmitted_bytes_total",
        "node_infiniband_port_errors_received_total",
        "node_infiniband_symbol_error_total",
        "node_infiniband_link_downed_total",
        "node_infiniband_link_error_recovery_total",
        "node_network_mtu_bytes",
        "node_memory_MemAvailable_bytes",
        "node_memory_MemTotal_bytes",
        "node_pressure_memory_waiting_seconds_total",
        "node_pressure_memory_stalled_seconds_total",
        "node_uname_info",
        "node_dmi_info",
        "node_textfile_mtime_seconds",
    }
)
# the metrics role's textfile series on every node (textseries.py, docs/roles/metrics.md)
HALO = frozenset(series.name for series in textseries.SERIES.values())
PROMETHEUS = frozenset({"up", "ALERTS"})
# Grafana's variables as a query to Prometheus itself takes them
GRAFANA_VARIABLES = {
    "$__rate_interval": "2m",
    "$__interval": "2m",
    "$__range": "1h",
    "$Deployment_id": ".*",
    "$node": ".*",
    "$model": ".*",
}
KEYWORDS = frozenset(
    {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right"}
    | {"bool", "offset"}
)


def vllm_names() -> frozenset[str]:
    """Every series name vLLM 0.33.0's core families expose."""
    suffixes = {"gauge": ("",), "counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
    return frozenset(
        name + suffix
        for kind, names in VLLM_FAMILIES.items()
        for name in names
        for suffix in suffixes[kind]
    )


def declared() -> frozenset[str]:
    return vllm_names() | NODE_EXPORTER | HALO | PROMETHEUS


@dataclass(frozen=True)
class Query:
    """One query: where it comes from (a dashboard's panel, an alert), and its expression."""

    source: str  # `halo-cluster.json` or `alerts.yml`
    title: str  # the panel's title and the target's refId, or the alert's name
    expr: str

    def concrete(self) -> str:
        """The expression as Prometheus takes it: Grafana's variables given values."""
        text = self.expr
        for name in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
            text = text.replace(name, GRAFANA_VARIABLES[name])
        return text


def dashboards() -> dict[str, str]:
    """Every dashboard's JSON, by file name, as the checkout or the wheel has it."""
    loader = jinja2.PackageLoader(PACKAGE, "metrics")
    names = sorted(n for n in loader.list_templates() if n.startswith(f"{SOURCE}/"))
    return {Path(n).name: loader.get_source(jinja2.Environment(), n)[0] for n in names}


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside a collapsed row too."""
    found = []
    for panel in dashboard.get("panels", []):
        found += [panel, *panel.get("panels", [])]
    return found


def dashboard_queries() -> list[Query]:
    return [
        Query(name, f"{panel['title']} ({target['refId']})", target["expr"])
        for name, text in dashboards().items()
        for panel in panels(json.loads(text))
        for target in panel.get("targets", [])
    ]


def alert_queries(bounds: dict[str, Any] | None = None) -> list[Query]:
    rendered = yaml.safe_load(alerts.render(bounds))
    return [
        Query(alerts.TARGET, rule["alert"], rule["expr"])
        for group in rendered["groups"]
        for rule in group["rules"]
    ]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (its identifiers that are neither a function,
    an aggregation, a keyword nor a label)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings
    text = re.sub(r"\$\w+", "", text)  # Grafana's variables
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", text)  # label matchers, ranges
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b", "", text)  # numbers
    found = re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text)
    return {m.group(0) for m in found if m.group(0) not in KEYWORDS and not _call(text, m.end())}


def _call(text: str, end: int) -> bool:
    """Whether the identifier ending at `end` is a function's or aggregation's name."""
    return text[end:].lstrip().startswith("(")
