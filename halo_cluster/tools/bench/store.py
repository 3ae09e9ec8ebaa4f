"""What a bench run is kept as (docs/bench.md): its key, everything a result depends on (every
serve key of the schema in use, the digest, the model's revision, each node's kernel and firmware,
the workload), and the files under the bench folder: the run's record in runs/, its line in
index.jsonl (what jq queries), report.md and its chart (chart.py), each written whole."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from halo_cluster.config import lock as locks
from halo_cluster.config.model import Cluster
from halo_cluster.config.schema import current, host_name
from halo_cluster.node.versions import FIRMWARE_PACKAGES
from halo_cluster.tools.bench import chart, results

SERVE = "serve"  # the section whose keys reach vLLM and Ray (`serve_values`)


@dataclass(frozen=True)
class Head:
    """What the run reads of the cluster before it measures."""

    digest: str  # the digest halo-vllm really runs (its ImageName), not the lock's
    revision: str | None  # the model snapshot's commit (refs/main), None for a path
    lab: bool  # /v1/models says the lab's stand-in serves
    nodes: dict[str, dict]  # name -> {kernel, firmware: {package: EVR}}


def workload(cluster: Cluster) -> dict:
    bench = cluster.bench
    return {
        "input_len": bench.input_len,
        "output_len": bench.output_len,
        "num_prompts": bench.num_prompts,
        "concurrency": list(bench.concurrency),
        "seed": bench.seed,
        "warmups": bench.warmups,
    }


def key(cluster: Cluster, head: Head) -> dict:
    """Everything a result depends on (docs/bench.md, "The key"): the serve keys by name, then
    what the run reads of the cluster and the workload."""
    return {
        **serve_values(cluster),
        "image_digest": head.digest,
        "revision": head.revision,
        "nodes": head.nodes,
        "workload": workload(cluster),
        "lab": head.lab,
    }


def serve_values(cluster: Cluster) -> dict:
    """Every key of the serve section as the deploy gives it to vLLM and Ray (its host data: a
    derived default resolved), by its name below `serve.`, read from the schema the config was
    loaded with, so that a new key is in the key; a key whose field says why a result does not
    depend on it (`Field.unmeasured`: an address, a secret's file, the deploy's wait) is not.
    `serve.env` is the user's environment of vLLM and Ray: it changes throughput as a flag does,
    and no secret is ever in it (secrets.env, the token file)."""
    values = cluster.values()
    return {
        field.path.removeprefix(f"{SERVE}."): plain(values[host_name(field.path)])
        for field in current().fields
        if field.path.startswith(f"{SERVE}.")
        and field.type != "mapping"
        and "[]" not in field.path
        and not field.unmeasured
    }


def plain(value: object) -> object:
    """A value as its JSON reads back (a list for a tuple, a mapping sorted), so that a stored
    key and a new one compare equal."""
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {name: plain(value[name]) for name in sorted(value)}
    return value


def one_value(nodes: dict[str, dict], pick) -> str:
    """A field of every node as one text: the value when the nodes agree, else each node's."""
    values = {name: pick(node) for name, node in nodes.items()}
    if len(set(values.values())) == 1:
        return next(iter(values.values()))
    return " ".join(f"{name}={value}" for name, value in values.items())


def firmware_text(node: dict) -> str:
    return node["firmware"].get(FIRMWARE_PACKAGES[0], "none")


def index_line(record: dict, file: str, vllm: str) -> dict:
    """The run's line in index.jsonl (docs/bench.md): what jq queries; without a verdict yet."""
    meta = record["halo_cluster"]
    nodes = meta["key"]["nodes"]
    return {
        "date": meta["date"],
        "run_id": meta["run_id"],
        "file": file,
        "config_id": meta["config_id"],
        "key_id": meta["key_id"],
        "image_digest": meta["key"]["image_digest"],
        "vllm": vllm,
        "kernel": one_value(nodes, lambda n: n["kernel"]),
        "firmware": one_value(nodes, firmware_text),
        "lab": meta["lab"],
        "levels": {c: results.level(result) for c, result in record["results"].items()},
        "key": meta["key"],
        "compared_to": None,
        "verdict": None,
    }


def read_index(folder: Path) -> list[dict]:
    path = folder / "index.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def unready(folder: Path) -> str | None:
    """Why the history at FOLDER cannot take a run, found before any node is reached (else
    minutes of measuring end in a traceback): the folder, or the first one of its parents that
    exists, not writable, or its index not readable. Nothing is written here."""
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not existing.is_dir():
        return f"{existing}: not a folder, so {folder} cannot be written"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing}: not writable, so {folder} cannot be written"
    try:
        read_index(folder)
    except (OSError, ValueError) as error:  # ValueError: a line that is not JSON
        return f"{folder / 'index.jsonl'}: not readable: {error}"
    return None


def store(folder: Path, record: dict, line: dict) -> None:
    """The run's file, its index line, report.md and chart.svg, each written whole."""
    runs = folder / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    (folder / line["file"]).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    with (folder / "index.jsonl").open("a") as index:
        index.write(json.dumps(line, sort_keys=True) + "\n")
    (folder / "report.md").write_text(results.report(read_index(folder)))
    (folder / chart.FILE).write_text(chart.svg(read_index(folder)))


def vllm_version(cluster: Cluster, digest: str) -> str:
    """The vLLM version the lock records for `digest` (the deploy read it from the image)."""
    lock, _ = locks.read(Path(cluster.container.lock))
    return (lock.vllm or "?") if lock and lock.digest == digest else "?"


def keep(
    cluster: Cluster,
    folder: Path,
    head: Head,
    measured: dict[str, dict],
    run_id: str,
) -> tuple[dict, results.Comparison]:
    """The run's record and index line, compared and stored under `folder`."""
    the_key = key(cluster, head)
    date = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    meta = {
        "run_id": run_id,
        "date": date,
        "key": the_key,
        "config_id": results.config_id(the_key),
        "key_id": results.key_id(the_key),
        "lab": head.lab,
    }
    record = {"halo_cluster": meta, "results": measured}
    line = index_line(
        record, f"runs/{date}-{meta['key_id']}.json", vllm_version(cluster, head.digest)
    )
    previous = results.previous_of([*read_index(folder), line], line)
    comparison = results.compare(line, previous, cluster.bench.tolerance)
    line.update(compared_to=previous and previous["run_id"], verdict=comparison.verdict)
    store(folder, record, line)
    return line, comparison
