"""`halo-cluster bench [--config PATH] [--compare]`: the image's own `vllm bench serve`, run in
the head's running halo-vllm container against the serving cluster, at each of `bench.concurrency`
with the seeded random workload of `bench.*`; every result kept under reports/bench/ keyed by what
it depends on, and compared with the previous run of the same configuration (docs/bench.md).

Exit 0 within `bench.tolerance` (or the first run of a configuration: its baseline), 3 on a
regression (output tokens/s fell by more than the tolerance at a level, or failed requests
rose), 1 on an error (not serving, a flag the image's vLLM lacks, a level that failed or timed
out, a bad config). `measure` is also the image upgrade's (its gate: gate.py). This module
runs and collects; what a run is kept as is store.py's, what it says view.py's.

The API key never reaches a command line: the container's shell is given the text
`OPENAI_API_KEY="$VLLM_API_KEY"` and expands it into vLLM's environment, from the container's own
(secrets.env); vLLM's client sends it as `Authorization: Bearer` (endpoint_request_func.py).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
import sys
from pathlib import Path

from halo_cluster.config import lock as locks
from halo_cluster.config.model import Cluster, Node
from halo_cluster.config.quoting import quote
from halo_cluster.node import batch
from halo_cluster.node.facts import as_user
from halo_cluster.node.image import IMAGES_FORMAT, parse_images
from halo_cluster.node.memory import hub_folder
from halo_cluster.node.versions import FIRMWARE_PACKAGES, versions_command, versions_process
from halo_cluster.tools import jsonout, options, project, reach, transport
from halo_cluster.tools.bench import chart, results, store, view
from halo_cluster.tools.bench.store import Head
from halo_cluster.tools.commands.exits import ERROR
from halo_cluster.tools.status import read

CONTAINER = "halo-vllm"
RESULT_DIR = "/tmp/halo-bench"  # inside the container: the result files, removed once read
PROGRESS_SECONDS = 10
KILL_AFTER = 10  # seconds after a level's timeout until a client that ignored TERM is killed
REVISION = re.compile(r"[0-9a-f]{40}")
# the image's login environment puts vllm on PATH (ROCm's and the venv's), as the image's own
# scripts see it; vLLM's stdout goes to stderr, so that stdout carries the result file alone
BENCH_SHELL = ". /etc/profile >/dev/null 2>&1; "


class BenchError(Exception):
    """A run that could not measure: one line saying what and where."""


class Unreachable(BenchError):
    """Nodes that could not be read: one line each (reach.py), by name."""

    def __init__(self, lines: dict[str, str]) -> None:
        super().__init__("\n".join(lines.values()))
        self.lines = lines


def reports() -> Path:
    return project.reports() / "bench"


def snapshot_dir(cluster: Cluster, revision: str | None) -> str:
    """The model's folder inside the container: the mounted HF cache's snapshot, or its path."""
    model = cluster.serve.model
    if model.startswith("/"):
        return model
    return f"/root/{hub_folder(model)}/snapshots/{revision}"


def bench_argv(cluster: Cluster, head: Head, run_id: str, concurrency: int) -> list[str]:
    """`vllm bench serve`'s flags for one level (vllm/benchmarks/serve.py, datasets/arg_utils.py):
    the served model by name, its tokenizer from the snapshot (offline), greedy, the result
    saved under a name of the run's."""
    bench, serve = cluster.bench, cluster.serve
    folder = snapshot_dir(cluster, head.revision)
    return [
        "--backend", "openai", "--base-url", serve.head_url, "--endpoint", "/v1/completions",
        "--model", folder, "--served-model-name", serve.served_model_name, "--tokenizer", folder,
        "--dataset-name", "random", "--random-input-len", str(bench.input_len),
        "--random-output-len", str(bench.output_len), "--num-prompts", str(bench.num_prompts),
        "--max-concurrency", str(concurrency), "--seed", str(bench.seed),
        "--num-warmups", str(warmups(bench.warmups, concurrency)), "--temperature", "0",
        "--save-result",
        "--result-dir", RESULT_DIR, "--result-filename", result_name(run_id, concurrency),
        "--metadata", f"halo_run={run_id}",
    ]  # fmt: skip


def warmups(configured: int, concurrency: int) -> int:
    """At least one request per slot of the level: vLLM sends its warm-ups under the level's
    `--max-concurrency` (benchmarks/serve.py, `warmup_semaphore`), so fewer than `concurrency`
    of them never reach the level's batch size, and its first-use costs (graph capture,
    allocations at that size) would land in the measured requests."""
    return max(configured, concurrency)


def flags(argv: list[str]) -> list[str]:
    return [arg for arg in argv if arg.startswith("--")]


def result_name(run_id: str, concurrency: int) -> str:
    return f"{run_id}-c{concurrency}.json"


def in_container(cluster: Cluster, script: str) -> str:
    """A shell line on the head: `script` in the running halo-vllm, as the cluster user."""
    exec_ = f"podman exec {CONTAINER} sh -c {shlex.quote(BENCH_SHELL + script)}"
    return as_user(cluster.cluster_user, exec_)


def level_script(argv: list[str], run_id: str, concurrency: int, seconds: int) -> str:
    """One level in the container's shell: vLLM's client with the key from the container's
    environment, stopped after `seconds` in the container itself (ending the SSH session does
    not end a `podman exec`: the client would go on loading the cluster), then its result file
    printed and removed."""
    path = shlex.quote(posixpath.join(RESULT_DIR, result_name(run_id, concurrency)))
    return (
        f'OPENAI_API_KEY="$VLLM_API_KEY" timeout -k {KILL_AFTER} {seconds} '
        f"vllm bench serve {shlex.join(argv)} 1>&2 && "
        f"cat {path}; code=$?; rm -f {path}; exit $code"
    )


def level_command(cluster: Cluster, argv: list[str], run_id: str, concurrency: int) -> str:
    script = level_script(argv, run_id, concurrency, cluster.bench.timeout)
    return in_container(cluster, script)


def help_command(cluster: Cluster) -> str:
    # vLLM's FlexibleArgumentParser prints only its groups for `--help`; `--help=all` lists
    # every flag (vllm/utils/argparse_utils.py, format_help)
    return in_container(cluster, "vllm bench serve --help=all")


def gather_commands(cluster: Cluster, node: Node) -> dict[str, str]:
    """What the key needs of a node, as named commands of one batched read (node/batch.py): its
    kernel and firmware; of the head also the image halo-vllm runs, the model's revision and
    whether the lab's stand-in serves."""
    user = cluster.cluster_user
    commands = {"versions": versions_command()}
    if node.role == "head":
        inspect = f"podman container inspect --format {shlex.quote(IMAGES_FORMAT)} {CONTAINER}"
        model = cluster.serve.model
        refs = f"~{user}/{shlex.quote(hub_folder(model))}/refs/main" if model[:1] != "/" else ""
        commands |= {
            "images": as_user(user, inspect),
            "revision": f"cat {refs}" if refs else "true",
            "models": read.models_command(cluster),
        }
    return commands


def node_versions(lines: list[str]) -> dict:
    info = versions_process(lines)
    firmware = {p["name"]: p["evr"] for p in info["packages"] if p["name"] in FIRMWARE_PACKAGES}
    return {"kernel": info["running"], "firmware": dict(sorted(firmware.items()))}


def parse_head(found: dict[str, batch.Part], nodes: dict[str, dict]) -> Head:
    """The head's read into the run's `Head`, or what stops the run."""
    images = parse_images(found["images"].filled)
    if CONTAINER not in images:
        raise BenchError("not serving: the head has no running halo-vllm container")
    digest = images[CONTAINER]["reference"].partition("@")[2]
    if not locks.DIGEST.fullmatch(digest):
        raise BenchError(f"halo-vllm runs {images[CONTAINER]['reference']}, not a digest")
    revision = next(iter(found["revision"].filled), "").strip() or None
    if revision is not None and not REVISION.fullmatch(revision):
        raise BenchError(f"the model's refs/main reads {quote(revision)}, not a commit")
    try:
        models = json.loads(found["models"].out)["data"]
    except (ValueError, KeyError, TypeError):
        raise BenchError("not serving: the head's /v1/models did not answer") from None
    lab = any("lab stand-in" in str(m.get("owned_by", "")) for m in models)
    return Head(digest, revision, lab, nodes)


def read_cluster(cluster: Cluster, ssh: transport.SshTransport) -> Head:
    answers = ssh.read_all(lambda node: gather_commands(cluster, node))
    down = {name: reach.down(result) for name, (result, _) in answers.items() if not result.reached}
    if down:
        raise Unreachable(down)
    nodes = {name: node_versions(found["versions"].filled) for name, (_, found) in answers.items()}
    head = parse_head(answers[cluster.head.name][1], nodes)
    if head.revision is None and not cluster.serve.model.startswith("/"):
        # the client reads the tokenizer from the snapshot, offline, as the server does
        raise BenchError(f"{cluster.serve.model}: no refs/main in the head's Hugging Face cache")
    return head


def check_flags(
    cluster: Cluster,
    ssh: transport.SshTransport,
    head: Head,
    wanted: list[str],
    folder: Path,
) -> None:
    """Every flag the run passes, against this image's `--help=all`, cached per digest."""
    cached = folder / "flags" / f"{head.digest.removeprefix('sha256:')}.txt"
    if not cached.is_file():
        answer = ssh.run(cluster.head, help_command(cluster))
        if not answer.ok or "--" not in answer.out:
            last = answer.error or "no output"
            raise BenchError(f"image {head.digest}: vllm bench serve --help=all failed: {last}")
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(answer.out)
    missing = results.missing_flags(cached.read_text(), wanted)
    if missing:
        raise BenchError(f"image {head.digest}: vllm bench serve has no {', '.join(missing)}")


def run_level(
    cluster: Cluster,
    ssh: transport.SshTransport,
    head: Head,
    run_id: str,
    concurrency: int,
) -> dict:
    """One level, saying every PROGRESS_SECONDS how long it has run; its result JSON."""
    bench = cluster.bench
    what = (
        f"bench: concurrency {concurrency}: {bench.num_prompts} prompts "
        f"({bench.input_len} in / {bench.output_len} out)"
    )
    print(f"{what}: started", flush=True)
    command = level_command(cluster, bench_argv(cluster, head, run_id, concurrency), run_id,
                            concurrency)  # fmt: skip
    answer = ssh.run(
        cluster.head,
        command,
        timeout=bench.timeout,
        tick=lambda seconds: print(f"{what}, {seconds:.0f} s so far", flush=True),
        every=PROGRESS_SECONDS,
    )
    said = answer.error or "no output"
    if answer.code == transport.TIMED_OUT:  # the session ended: the client stops in the container
        raise BenchError(f"concurrency {concurrency}: no result after {bench.timeout} s")
    if not answer.ok:
        raise BenchError(
            f"concurrency {concurrency}: vllm bench serve failed (exit {answer.code}): {said}"
        )
    try:
        result = json.loads(answer.out)
    except ValueError:
        raise BenchError(f"concurrency {concurrency}: the result file is not JSON") from None
    if not result.get("completed"):
        raise BenchError(f"concurrency {concurrency}: every request failed: {said}")
    return result


def measure(
    cluster: Cluster, folder: Path, run_ids: tuple[str, ...] = (locks.RUN,)
) -> list[tuple[dict, results.Comparison]]:
    """One run per id, one after another on one read of the cluster and its flag check: each
    level, then the run stored and compared with the previous run of its configuration."""
    kept = []
    with transport.connected(cluster) as ssh:
        head = read_cluster(cluster, ssh)
        check_flags(cluster, ssh, head, flags(bench_argv(cluster, head, run_ids[0], 1)), folder)
        for run_id in run_ids:
            measured = {
                str(c): run_level(cluster, ssh, head, run_id, c) for c in cluster.bench.concurrency
            }
            line, comparison = store.keep(cluster, folder, head, measured, run_id)
            # on the shared connection, before it is closed: a new one per append would be a
            # second login to the head, and could fail where the run's own did not
            history(ssh, cluster, line)
            kept.append((line, comparison))
    return kept


def history(ssh: transport.SshTransport, cluster: Cluster, line: dict) -> None:
    """The run's `bench` line in the head's history (a failure to append is only said)."""
    event = locks.history_line(
        "bench",
        run_id=line["run_id"],
        file=line["file"],
        config_id=line["config_id"],
        key_id=line["key_id"],
        output_throughput={c: v["output_throughput"] for c, v in line["levels"].items()},
        verdict=line["verdict"],
    )
    append = (
        f'mkdir -p "$HOME/{posixpath.dirname(locks.HISTORY)}" && '
        f"printf '%s\\n' {shlex.quote(event)} >> \"$HOME/{locks.HISTORY}\""
    )
    answer = ssh.run(cluster.head, as_user(cluster.cluster_user, f"sh -c {shlex.quote(append)}"))
    if not answer.ok:
        print(f"bench: the head's history was not appended: {answer.error}")


def main(argv: list[str]) -> int:
    parser = options.parser("halo-cluster bench", __doc__, ERROR)
    parser.flag("--compare", "compare the last two runs only")
    parser.flag("--json", "the report as one JSON document on stdout")
    args = parser.parse_args(argv)
    cluster = project.load_or_say(project.config())
    if cluster is None:
        return ERROR
    if change := project.next_deploy(cluster):  # bench writes no lock; stdout may be --json's
        print(change, file=sys.stderr)
    folder = reports()
    if args.compare:
        return view.compare_only(cluster, folder, args.json)
    if not cluster.serve.enabled:
        said_ = f"serve.enabled is false in {cluster.source}: nothing serves"
        return view.failed(said_, args.json)
    if unready := store.unready(folder):  # a local input: before any node is reached
        return view.failed(unready, args.json)
    try:
        [(line, comparison)] = measure(cluster, folder)
    except Unreachable as error:
        for text in error.lines.values():
            print(f"bench: {text}", file=sys.stderr)
        nodes = {
            n.name: {"reachable": n.name not in error.lines, "reason": error.lines.get(n.name)}
            for n in cluster.nodes
        }
        return view.failed("a node cannot be reached", args.json, nodes)
    except BenchError as error:
        return view.failed(str(error), args.json)
    except OSError as error:  # reports/ not writable
        return view.failed(str(error), args.json)
    previous = next(
        (x for x in store.read_index(folder) if x["run_id"] == line["compared_to"]), None
    )
    svg = folder / chart.FILE
    if args.json:
        document = view.report_json(line, comparison, previous) | {"chart": str(svg)}
        jsonout.emit("bench", document)
        return comparison.exit_code
    print("\n".join(view.said(line, comparison, previous)))
    print(f"bench: report {folder / 'report.md'}")
    print(f"bench: chart {svg}")
    return comparison.exit_code
