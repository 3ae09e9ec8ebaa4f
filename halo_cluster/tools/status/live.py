"""`status` live: what the cluster did over the last minutes, read from Prometheus on the head
when it runs there (the metrics role): requests running and waiting, generated tokens/s, time to
first token p50/p95 over `WINDOW`, and per node GPU busy, memory available and GTT used.

Each query is one `curl` on the head in status's one batched read of it (node/batch.py, through
the transport): Prometheus listens on the head's data address, which the controller may not
reach. The answer is Prometheus' HTTP API (`/api/v1/query`, docs/querying/api.md): an envelope
`{"status": "success"|"error", "data": {"resultType", "result"}, "errorType", "error"}`, each
sample's value a string, so "NaN" and "+Inf" arrive as text. No data (an empty vector, NaN: a
quantile of no requests) is None, shown as "no data"; Prometheus not answering is one line.
With `metrics.listen: all` Prometheus asks for its password: each curl reads the Authorization
header on its stdin from the metrics role's 0600 file on the head (`cluster.metrics
.authorization`), never from its command line.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping

from halo_cluster.config.model import Cluster, Node
from halo_cluster.node import batch

WINDOW = "5m"  # what "live" covers: tokens/s and the quantiles are rates over it
CURL_SECONDS = 5  # each query's bound on the head (curl -m); Prometheus' own is below it
QUERY_TIMEOUT = "4s"
PREFIX = "live:"  # the queries' names in the head's batched read, apart from status's own
# the cluster's numbers: vLLM's metric names as it exposes them (a counter with `_total`)
CLUSTER = {
    "requests_running": "sum(vllm:num_requests_running)",
    "requests_waiting": "sum(vllm:num_requests_waiting)",
    "tokens_per_s": f"sum(rate(vllm:generation_tokens_total[{WINDOW}]))",
    "ttft_p50_s": "histogram_quantile(0.5, sum by (le) "
    f"(rate(vllm:time_to_first_token_seconds_bucket[{WINDOW}])))",
    "ttft_p95_s": "histogram_quantile(0.95, sum by (le) "
    f"(rate(vllm:time_to_first_token_seconds_bucket[{WINDOW}])))",
}
# each node's, by the `node` label the metrics role gives its targets (and their `instance`)
NODES = {
    "gpu_busy_percent": "max by (node, instance) (node_drm_gpu_busy_percent)",
    "memory_available_bytes": "max by (node, instance) (node_memory_MemAvailable_bytes)",
    "gtt_used_bytes": "sum by (node, instance) (node_drm_memory_gtt_used_bytes)",
}
QUERIES = CLUSTER | NODES
UP, DOWN, OFF, UNKNOWN = "up", "down", "off", "unknown"
GIB = 1 << 30


def url(cluster: Cluster) -> str | None:
    """Prometheus' URL as the head reaches it (the metrics role's `url`: its data address), or
    None when metrics are off."""
    metrics = cluster.derived.get("metrics")
    return metrics.url if metrics is not None and metrics.enabled else None


def authorization(cluster: Cluster) -> str | None:
    """The head's file of the header Prometheus asks for (`~USER/PATH`: a redirection's word, so
    the shell expands it), or None when it asks for none (listen: data, metrics off)."""
    metrics = cluster.derived.get("metrics")
    path = metrics.authorization if metrics is not None else ""
    return f"~{cluster.cluster_user}/{shlex.quote(path)}" if path else None


def query_command(base: str, promql: str, header: str | None = None) -> str:
    """One instant query on the head: the body printed whatever the HTTP status (Prometheus'
    errors are JSON too), curl's own failure on stderr, bounded by CURL_SECONDS; with `header`,
    its file on curl's stdin (`-H @-`: the password in no process's argv)."""
    query = (
        f"curl -sS -m {CURL_SECONDS} -G --data-urlencode {shlex.quote('query=' + promql)} "
        f"--data-urlencode timeout={QUERY_TIMEOUT}"
    )
    if header is None:
        return f"{query} {base}/api/v1/query"
    return f"{query} -H @- {base}/api/v1/query < {header}"


def commands(cluster: Cluster) -> dict[str, str]:
    """The head's named commands for the live read (none when metrics are off)."""
    base = url(cluster)
    if base is None:
        return {}
    header = authorization(cluster)
    return {PREFIX + name: query_command(base, q, header) for name, q in QUERIES.items()}


def sample(text: str) -> float | None:
    """A sample value as Prometheus writes it (a string: "1.5", "NaN", "+Inf"); NaN is None."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def answer(part: batch.Part) -> tuple[list[dict] | None, str]:
    """One query's part: (its series, "") or (None, why it has none: curl's or Prometheus'
    error)."""
    if part.status != 0:
        lines = [line.strip() for line in part.err.splitlines() if line.strip()]
        return None, lines[-1][:200] if lines else f"no answer (exit {part.status})"
    try:
        envelope = json.loads(part.out)
    except ValueError:
        return None, f"not Prometheus' JSON: {part.out.strip()[:80]!r}"
    if not isinstance(envelope, dict) or envelope.get("status") != "success":
        found = envelope if isinstance(envelope, dict) else {}
        return None, f"{found.get('errorType', 'error')}: {found.get('error', '?')}"
    data = envelope.get("data") or {}
    if data.get("resultType") == "scalar":
        return [{"metric": {}, "value": data["result"]}], ""
    return list(data.get("result") or []), ""


def first(series: list[dict]) -> float | None:
    """A cluster-wide query's one value (None when it has none, or NaN)."""
    return sample(series[0].get("value", [0, None])[1]) if series else None


def node_of(labels: Mapping[str, str], nodes: tuple[Node, ...]) -> str | None:
    """The node a series was scraped from: its `node` label (the metrics role's targets), else
    its `instance` host (the target's address without the port) as a node's data address, SSH
    host or name."""
    names = {node.name for node in nodes}
    if labels.get("node") in names:
        return labels["node"]
    host = labels.get("instance", "").rsplit(":", 1)[0].strip("[]")
    return next((n.name for n in nodes if host in (n.address, n.ssh_host, n.name)), None)


def read(cluster: Cluster, found: Mapping[str, batch.Part]) -> dict:
    """The live numbers from the head's read: `state` up (with `errors`, one per query that
    failed), down (`reason`: no query was answered) or off (metrics disabled)."""
    base = url(cluster)
    if base is None:
        return {"state": OFF, "prometheus": None, "reason": "metrics.enabled is false"}
    answers = {
        name: answer(found.get(PREFIX + name, batch.Part(batch.NOT_RUN))) for name in QUERIES
    }
    if all(series is None for series, _ in answers.values()):
        reason = next(iter(answers.values()))[1]
        return {"state": DOWN, "prometheus": base, "reason": reason}
    live: dict = {"state": UP, "prometheus": base, "window": WINDOW, "reason": ""}
    live |= {name: first(answers[name][0] or []) for name in CLUSTER}
    nodes: dict[str, dict] = {n.name: dict.fromkeys(NODES) for n in cluster.nodes}
    for name in NODES:
        for series in answers[name][0] or []:
            node = node_of(series.get("metric", {}), cluster.nodes)
            if node is not None:
                nodes[node][name] = sample(series.get("value", [0, None])[1])
    live["nodes"] = nodes
    live["errors"] = [f"{name}: {why}" for name, (series, why) in answers.items() if series is None]
    return live


def _number(value: float | None, unit: str, scale: float = 1, digits: int = 1) -> str:
    return "no data" if value is None else f"{value / scale:.{digits}f}{unit}"


def lines(live: dict) -> list[str]:
    """What `status` says of it: one line when Prometheus is off or does not answer, else the
    cluster's line and one per node."""
    state = live.get("state", UNKNOWN)
    if state == OFF:
        return ["live: metrics.enabled is false: no Prometheus to read (the table is this moment)"]
    if state == DOWN:
        return [f"live: Prometheus at {live['prometheus']} did not answer ({live['reason']}): "
                "the table is this moment only"]  # fmt: skip
    if state != UP:
        return ["live: not read (the head was not read)"]
    out = [
        f"live (Prometheus {live['prometheus']}, last {WINDOW}): requests "
        f"{_number(live['requests_running'], ' running', digits=0)}, "
        f"{_number(live['requests_waiting'], ' waiting', digits=0)}; "
        f"{_number(live['tokens_per_s'], ' tokens/s')}; time to first token "
        f"p50 {_number(live['ttft_p50_s'], ' s', digits=2)}, "
        f"p95 {_number(live['ttft_p95_s'], ' s', digits=2)}"
    ]
    out += [
        f"  {name}: GPU busy {_number(n['gpu_busy_percent'], ' %', digits=0)}, memory available "
        f"{_number(n['memory_available_bytes'], ' GiB', GIB)}, GTT used "
        f"{_number(n['gtt_used_bytes'], ' GiB', GIB)}"
        for name, n in live["nodes"].items()
    ]
    out += [f"  live: query {error}" for error in live["errors"]]
    return out
