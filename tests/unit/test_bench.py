"""`halo-cluster bench` on recorded values: the keys' checks, the key and its ids, the head's
answers, the flag check, the command's key handling, the comparison's verdicts and exit codes,
index.jsonl and report.md (the upgrade gate: test_bench_gate.py); no cluster: the run itself is
the lab's, tests/e2e/test_bench.py."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from halo_cluster.config.loader import ConfigError
from halo_cluster.config.serving import SECRETS_ENV
from halo_cluster.node import batch
from halo_cluster.tools import project, transport
from halo_cluster.tools.bench import results, run, store, view
from halo_cluster.tools.commands import documents
from halo_cluster.tools.status import read
from tests.recorded import fixture, skopeo_digest, strix_halo_versions
from tests.unit.configs import VALID_ROCE, write
from tests.unit.helpers_bench import (
    HEAD_READS,
    REVISION,
    SERVING,
    SILENT,
    cluster,
    fake_ssh,
    gather_answers,
    head,
    head_sections,
)

RESULT = json.loads(fixture("vllm-bench-serve-result-random-qwen25-vl-3b.json"))
OTHER = "sha256:" + "b" * 64


def run_line(the_cluster, the_head: store.Head, scale: float = 1.0, failed: int = 1) -> dict:
    result = dict(RESULT, output_throughput=RESULT["output_throughput"] * scale, failed=failed)
    the_key = store.key(the_cluster, the_head)
    meta = {"run_id": f"{scale:g}-{failed}", "date": "20261201T100000Z", "key": the_key,
            "config_id": results.config_id(the_key), "key_id": results.key_id(the_key),
            "lab": the_head.lab}  # fmt: skip
    record = {"halo_cluster": meta, "results": {"1": result, "8": result}}
    return store.index_line(record, f"runs/x-{meta['key_id']}.json", "0.33.0")


# ---- the keys


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("bench: {concurrency: [8, 1]}", "bench.concurrency: [8, 1]: give at least two levels"),
        ("bench: {concurrency: [4]}", "bench.concurrency: [4]: give at least two levels"),
        ("bench: {concurrency: [1, 64]}", "bench.concurrency: 64 is more than bench.num_prompts"),
        ("bench: {concurrency: [1, '8']}", "bench.concurrency: expected list of integers"),
        ("bench: {tolerance: 150}", "bench.tolerance: 150 is outside 0-100 %"),
        ("bench: {warmups: -1}", "bench.warmups: -1 is outside 0-100000"),
        ("bench: {gate: maybe}", "bench.gate: expected boolean"),
        ("bench: {runs: 3}", "bench.runs"),
    ],
)
def test_a_bad_bench_key_is_one_line_naming_it(tmp_path, text, problem) -> None:
    with pytest.raises(ConfigError) as error:
        cluster(tmp_path, text + "\n")
    assert any(problem in line for line in error.value.problems), error.value.problems


def test_the_defaults_are_vllms_workload_with_two_levels(tmp_path) -> None:
    assert store.workload(cluster(tmp_path)) == {
        "input_len": 1024, "output_len": 128, "num_prompts": 40, "concurrency": [1, 8],
        "seed": 0, "warmups": 3,
    }  # fmt: skip


# ---- the head's answers and the key


def test_the_head_gives_the_digest_that_serves_the_revision_and_each_nodes_versions() -> None:
    found = head()
    running, _ = strix_halo_versions()
    assert found.digest == skopeo_digest() and found.revision == REVISION and not found.lab
    assert found.nodes["halo1"] == {
        "kernel": running,
        "firmware": {"amd-gpu-firmware": "20260110-1.fc43", "linux-firmware": "20260110-1.fc43",
                     "linux-firmware-whence": "20260110-1.fc43"},
    }  # fmt: skip
    assert head(owned_by="lab stand-in for vLLM (no model loaded)").lab


def test_the_tests_head_answers_in_the_reads_own_order(tmp_path) -> None:
    the_cluster = cluster(tmp_path)
    assert tuple(run.gather_commands(the_cluster, the_cluster.head)) == HEAD_READS
    assert tuple(run.gather_commands(the_cluster, the_cluster.workers[0])) == HEAD_READS[:1]


def test_no_vllm_container_is_not_serving() -> None:
    found = head_sections(skopeo_digest())["halo1"]
    found["images"] = batch.Part(0)
    with pytest.raises(run.BenchError, match="not serving: the head has no running halo-vllm"):
        run.parse_head(found, {})


def test_config_id_ignores_the_image_kernel_and_firmware_and_key_id_does_not(tmp_path) -> None:
    one = cluster(tmp_path)
    first = store.key(one, head())
    upgraded = dict(first, image_digest=OTHER)
    upgraded["nodes"] = {**first["nodes"], "halo2": {"kernel": "6.18.9-200.fc43.x86_64",
                                                    "firmware": {}}}  # fmt: skip
    assert results.config_id(upgraded) == results.config_id(first)
    assert results.key_id(upgraded) != results.key_id(first)
    assert len(results.config_id(first)) == 12
    loaded = store.key(cluster(tmp_path, "bench: {concurrency: [1, 16]}\n"), head())
    text = (
        VALID_ROCE + "serve: {enabled: true, model: Qwen/Qwen3-14B, gpu_memory_utilization: 0.5}\n"
    )
    memory = store.key(project.load(write(tmp_path, text)), head())
    assert results.config_id(loaded) != results.config_id(first) != results.config_id(memory)


def test_the_users_serve_env_is_part_of_the_configuration(tmp_path) -> None:
    plain = store.key(cluster(tmp_path), head())
    text = VALID_ROCE + (
        "serve: {enabled: true, model: Qwen/Qwen3-14B, env: {PYTORCH_TUNABLEOP_ENABLED: '1'}}\n"
    )
    tuned = store.key(project.load(write(tmp_path, text)), head())
    assert tuned["env"] == {"PYTORCH_TUNABLEOP_ENABLED": "1"} and plain["env"] == {}
    assert results.config_id(tuned) != results.config_id(plain)


def test_the_model_is_read_from_the_mounted_snapshot(tmp_path) -> None:
    argv = run.bench_argv(cluster(tmp_path), head(), "ab12cd34", 8)
    folder = f"/root/.cache/huggingface/hub/models--Qwen--Qwen3-14B/snapshots/{REVISION}"
    assert argv[argv.index("--model") + 1] == folder == argv[argv.index("--tokenizer") + 1]
    assert argv[argv.index("--max-concurrency") + 1] == "8"
    assert argv[argv.index("--result-filename") + 1] == "ab12cd34-c8.json"


# ---- the flags and the key's way in


def test_every_flag_the_tool_passes_is_vllms_own(tmp_path) -> None:
    wanted = run.flags(run.bench_argv(cluster(tmp_path), head(), "r", 1))
    assert results.missing_flags(fixture("vllm-bench-serve-flags-009e6d4.txt"), wanted) == []


def test_an_image_whose_client_lacks_flags_is_refused_naming_them(tmp_path) -> None:
    the_head = head()
    cached = tmp_path / "flags" / f"{the_head.digest.removeprefix('sha256:')}.txt"
    cached.parent.mkdir()
    cached.write_text(fixture("benchmark-serving-help-vllm-legacy.txt"))
    wanted = run.flags(run.bench_argv(cluster(tmp_path), the_head, "r", 1))
    with pytest.raises(run.BenchError) as error:
        run.check_flags(cluster(tmp_path), None, the_head, wanted, tmp_path)  # cached: not asked
    assert str(error.value) == (
        f"image {the_head.digest}: vllm bench serve has no --served-model-name, "
        "--max-concurrency, --num-warmups, --temperature"
    )


def test_the_key_reaches_vllm_from_the_containers_environment_only(tmp_path) -> None:
    the_cluster = cluster(tmp_path)
    line = run.level_command(the_cluster, run.bench_argv(the_cluster, head(), "r", 1), "r", 1)
    words = shlex.split(line)
    script = words[words.index("-c") + 1]
    assert words[words.index("exec") + 1] == "halo-vllm"
    assert script.startswith(
        run.BENCH_SHELL + 'OPENAI_API_KEY="$VLLM_API_KEY" timeout -k 10 3600 vllm bench serve '
    )
    assert "Bearer" not in line and "--header" not in script


KEY = "sk-the-secret-0123"
# stand-ins on PATH for the head's tools, each recording its argv (what /proc/PID/cmdline shows
# every user) one word a line; curl also its stdin, podman runs `exec`'s command with the key in
# the container's environment, runuser what follows `--`
FAKE_TOOLS = {
    "curl": 'printf "%s\\n" "$@" >> "$ARGV_LOG"; cat >> "$STDIN_LOG"; echo \'{"data": []}\'\n',
    "runuser": 'printf "%s\\n" "$@" >> "$ARGV_LOG"\nwhile [ "$1" != -- ]; do shift; done\n'
    'shift; exec "$@"\n',
    # the test machine's /etc/profile would reset PATH, so the image's prologue is left out
    "podman": 'printf "%s\\n" "$@" >> "$ARGV_LOG"\n'
    f'[ "$1" = exec ] && VLLM_API_KEY={KEY} exec sh -c "${{5#{run.BENCH_SHELL}}}"\n',
    "vllm": 'printf "%s\\n" "$@" "env:$OPENAI_API_KEY" >> "$ARGV_LOG"\n',
}


def run_on_fake_head(tmp_path: Path, line: str) -> tuple[str, str]:
    """`line` in a real shell with FAKE_TOOLS first on PATH and the cluster user's secrets.env
    holding KEY: every argv the tools were given, and what curl read on stdin."""
    tools, home = tmp_path / "bin", tmp_path / "home"
    tools.mkdir()
    for name, body in FAKE_TOOLS.items():
        (tools / name).write_text("#!/bin/sh\n" + body)
        (tools / name).chmod(0o755)
    secrets = home / SECRETS_ENV
    secrets.parent.mkdir(parents=True)
    secrets.write_text(f"VLLM_API_KEY={KEY}\n")
    argv_log, stdin_log = tmp_path / "argv", tmp_path / "stdin"
    env = {"PATH": f"{tools}:/usr/bin:/bin", "ARGV_LOG": str(argv_log), "STDIN_LOG": str(stdin_log)}
    subprocess.run(["sh", "-c", line.replace("~vllm/", f"{home}/")], env=env, check=False,
                   capture_output=True, timeout=30)  # fmt: skip
    return argv_log.read_text(), stdin_log.read_text() if stdin_log.exists() else ""


def test_models_command_gives_curl_the_key_on_stdin_never_in_argv(tmp_path) -> None:
    argv, stdin = run_on_fake_head(tmp_path, read.models_command(cluster(tmp_path)))
    assert "-H\n@-\n" in argv and KEY not in argv
    assert stdin == f"Authorization: Bearer {KEY}\n"


def test_models_command_without_a_key_sends_no_header(tmp_path) -> None:
    line = read.models_command(cluster(tmp_path)).replace("VLLM_API_KEY=", "NO_KEY=")
    argv, stdin = run_on_fake_head(tmp_path, line)
    assert "/v1/models" in argv and stdin == ""


def test_no_bench_command_puts_the_key_in_an_argv(tmp_path) -> None:
    the_cluster = cluster(tmp_path)
    lines = [
        batch.named(run.gather_commands(the_cluster, the_cluster.head)),
        run.level_command(the_cluster, run.bench_argv(the_cluster, head(), "r", 1), "r", 1),
        run.help_command(the_cluster),
    ]
    argv, _ = run_on_fake_head(tmp_path, "\n".join(lines))
    assert "bench\nserve\n--backend" in argv and f"env:{KEY}" in argv  # vLLM got it, by env
    assert argv.count(KEY) == 1


def test_a_level_that_outlives_its_timeout_is_stopped_in_the_container(tmp_path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "vllm").write_text("#!/bin/sh\nexec /bin/sleep 30\n")
    (tools / "vllm").chmod(0o755)
    script = run.level_script(["--seed", "0"], "r", 1, seconds=1)
    env = {"PATH": f"{tools}:/usr/bin:/bin"}
    done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, timeout=20)
    assert done.returncode == 124  # timeout's own: the client was stopped, not left running


def test_the_warmups_fill_each_level_once(tmp_path) -> None:
    the_cluster = cluster(tmp_path)  # bench.warmups: 3
    for concurrency, wanted in ((1, "3"), (8, "8")):
        argv = run.bench_argv(the_cluster, head(), "r", concurrency)
        assert argv[argv.index("--num-warmups") + 1] == wanted


FAKE_SSH = """#!/bin/sh
# argv $1 -F, $2 config, $3 the alias (or -O for the master's exit)
if [ "$3" = -O ]; then echo close >> "$LOG"; exit 0; fi
script=$(cat)
case "$script" in
  *"container inspect"*) echo "read $3" >> "$LOG"; cat "$ANSWERS/head" ;;
  *"uname -r"*) echo "read $3" >> "$LOG"; cat "$ANSWERS/worker" ;;
  *--help=all*) echo help >> "$LOG"; cat "$ANSWERS/help" ;;
  *"vllm bench serve"*) echo level >> "$LOG"; cat "$ANSWERS/result" ;;
  *history.jsonl*) echo history >> "$LOG" ;;
esac
"""


def test_each_run_appends_the_history_before_closing_its_ssh_master(tmp_path, monkeypatch) -> None:
    """Two runs (the upgrade gate's side) on one read of the cluster: each kept, each appended,
    then the master closed."""
    answers = tmp_path / "answers"
    answers.mkdir()
    head_read, worker_read = gather_answers(skopeo_digest())
    (answers / "head").write_bytes(head_read)
    (answers / "worker").write_bytes(worker_read)
    (answers / "help").write_text(fixture("vllm-bench-serve-flags-009e6d4.txt"))
    (answers / "result").write_text(json.dumps(RESULT))
    fake_ssh(tmp_path, monkeypatch, FAKE_SSH)
    monkeypatch.setenv("PATH", f"{tmp_path / 'fakebin'}:/usr/bin:/bin")
    monkeypatch.setenv("LOG", str(tmp_path / "log"))
    monkeypatch.setenv("ANSWERS", str(answers))
    kept = run.measure(cluster(tmp_path), tmp_path / "reports", ("r-old1", "r-old2"))
    assert [(line["run_id"], c.verdict) for line, c in kept] == [
        ("r-old1", "baseline"), ("r-old2", "within")]  # fmt: skip
    assert store.read_index(tmp_path / "reports") == [line for line, _ in kept]
    calls = (tmp_path / "log").read_text().split()
    assert calls.count("help") == 1 and calls.count("read") == 2, calls
    assert calls[-8:] == ["level", "level", "history"] * 2 + ["close", "close"], calls


# ---- comparison, verdicts and exit codes


def test_a_first_run_is_the_baseline(tmp_path) -> None:
    latest = run_line(cluster(tmp_path), head())
    comparison = results.compare(latest, None, 10)
    assert (comparison.verdict, comparison.exit_code) == ("baseline", 0)


@pytest.mark.parametrize(
    ("scale", "failed", "verdict", "code"),
    [(0.95, 1, "within", 0), (1.2, 1, "within", 0), (0.85, 1, "regression", 3),
     (1.0, 2, "regression", 3)],
)  # fmt: skip
def test_output_falling_past_the_tolerance_or_more_failures_is_a_regression(
    tmp_path, scale, failed, verdict, code
) -> None:
    the_cluster = cluster(tmp_path)
    before = run_line(the_cluster, head())
    after = run_line(the_cluster, head(OTHER), scale, failed)
    comparison = results.compare(after, before, the_cluster.bench.tolerance)
    assert (comparison.verdict, comparison.exit_code) == (verdict, code)
    assert comparison.deltas["8"]["output_throughput"] == pytest.approx((scale - 1) * 100)
    assert comparison.changed == (f"image_digest: {skopeo_digest()} -> {OTHER}",)


def test_the_regression_says_the_level_the_fall_and_the_tolerance(tmp_path) -> None:
    the_cluster = cluster(tmp_path)
    comparison = results.compare(
        run_line(the_cluster, head(), 0.8), run_line(the_cluster, head()), 10
    )
    assert comparison.reasons[0] == (
        "concurrency 1: output tok/s fell 20.0 % (124.59 -> 99.67; tolerance 10 %)"
    )


def test_a_regression_is_never_the_next_comparison_base(tmp_path) -> None:
    the_cluster = cluster(tmp_path)
    good = dict(run_line(the_cluster, head()), verdict="baseline")
    slow = dict(run_line(the_cluster, head(OTHER), 0.8), verdict="regression")
    still_slow = run_line(the_cluster, head(OTHER), 0.8)
    lines = [good, slow, still_slow]
    assert results.previous_of(lines, still_slow) is good
    assert results.compare(still_slow, good, 10).verdict == "regression"


def test_bench_that_cannot_reach_the_head_is_an_error_not_a_traceback(
    tmp_path, monkeypatch, capsys
) -> None:
    fake_ssh(tmp_path, monkeypatch, SILENT)
    monkeypatch.setattr(transport, "READ_SECONDS", 0.2)
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.setenv("CLUSTER_CONFIG", str(write(tmp_path, SERVING)))
    assert run.main([]) == run.ERROR
    assert capsys.readouterr().err.splitlines() == [
        f"bench: {name} ({host}:22): cannot be reached: timed out (no answer within 0.2 s)"
        for name, host in (("halo1", "10.0.0.11"), ("halo2", "10.0.0.12"))
    ]


# ---- what is kept: the run's file, index.jsonl, report.md


def test_a_run_is_kept_as_its_file_an_index_line_and_the_report(tmp_path) -> None:
    the_cluster = cluster(tmp_path)
    first = run_line(the_cluster, head())
    second = run_line(the_cluster, head(OTHER), 0.8)
    for line in (first, second):
        record = {"halo_cluster": {"key": line["key"]}, "results": {"1": RESULT}}
        store.store(tmp_path, record, line)
    lines = store.read_index(tmp_path)
    assert [x["run_id"] for x in lines] == [first["run_id"], second["run_id"]]
    kept = json.loads((tmp_path / second["file"]).read_text())
    assert kept["results"]["1"] == RESULT  # vLLM's result fields, unchanged
    assert lines[0]["levels"]["8"] == {m: RESULT[m] for m in results.METRICS}
    assert lines[0]["kernel"] == strix_halo_versions()[0]
    assert lines[0]["firmware"] == "20260110-1.fc43"
    report = (tmp_path / "report.md").read_text()
    rows = [row for row in report.splitlines() if row.startswith("| 2026")]
    assert len(rows) == 2 and "| 124.59 | 124.59 |" in rows[0]
    assert "| -20.0 % / -20.0 % |" in rows[1] and skopeo_digest()[7:19] in rows[0]
    assert "Lab stand-in" not in report


def test_a_lab_run_is_marked_in_the_report(tmp_path) -> None:
    line = run_line(cluster(tmp_path), head(owned_by="lab stand-in for vLLM"))
    assert line["lab"] and "**Lab stand-in, not a model's numbers**" in results.report([line])


def test_compare_takes_the_latest_and_the_one_before_of_its_config(tmp_path, capsys) -> None:
    the_cluster = cluster(tmp_path)
    other = store.key(cluster(tmp_path, "bench: {concurrency: [1, 4]}\n"), head())
    stray = dict(run_line(the_cluster, head()), config_id=results.config_id(other), run_id="x")
    lines = [run_line(the_cluster, head()), stray, run_line(the_cluster, head(OTHER), 0.7)]
    (tmp_path / "index.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert view.compare_only(the_cluster, tmp_path) == 3
    out = capsys.readouterr().out
    assert f"changed: image_digest: {skopeo_digest()} -> {OTHER}" in out
    assert "-30.0 %" in out and out.rstrip().endswith("bench: regression")
    assert view.compare_only(the_cluster, tmp_path, as_json=True) == 3  # one document
    document = json.loads(capsys.readouterr().out)
    assert documents.problems("bench", document) == [] and document["verdict"] == "regression"


def test_compare_without_runs_is_an_error(tmp_path, capsys) -> None:
    assert view.compare_only(cluster(tmp_path), tmp_path) == 1
    assert "no runs yet" in capsys.readouterr().err
    assert view.compare_only(cluster(tmp_path), tmp_path, as_json=True) == 1
    document = json.loads(capsys.readouterr().out)
    assert documents.problems("bench", document) == [] and document["levels"] is None
    assert "no runs yet" in document["error"]


@pytest.mark.parametrize("problem", ["index", "not a folder"])
def test_a_history_that_cannot_take_the_run_is_said_before_any_node(
    tmp_path, monkeypatch, capsys, problem: str
) -> None:
    """Issue 45 item 15: the bench's history is a local input, checked before the first
    connection (the fake ssh leaves a mark when asked), not after minutes of measuring."""
    mark = tmp_path / "reached"
    fake_ssh(tmp_path, monkeypatch, f"touch {mark}; exit 1\n")
    monkeypatch.setattr(project, "ROOT", tmp_path)
    monkeypatch.setenv("CLUSTER_CONFIG", str(write(tmp_path, SERVING)))
    folder = run.reports()
    if problem == "index":
        folder.mkdir(parents=True)
        (folder / "index.jsonl").write_text("{not json\n")
    else:  # the state folder's reports/ a file (a mode would not stop root, who runs here too)
        folder.parent.parent.mkdir(parents=True)
        folder.parent.write_text("")
    assert run.main([]) == run.ERROR
    err = capsys.readouterr().err
    assert not mark.exists() and len(err.splitlines()) == 1, err
    said = (
        f"{folder}/index.jsonl: not readable: "
        if problem == "index"
        else (f"{folder.parent}: not a folder, so {folder} cannot be written")
    )
    assert err.startswith(f"bench: {said}"), err
