"""docs/ci.md's workflows run as written on a fresh runner, which has the checkout and nothing
git-ignored (cluster.yml, the state folder): each secret a workflow uses is named in the page's
text, and each file it reads (the config, the files the config names, a report it shows) is
written by an earlier step."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "ci.md").read_text()
BLOCKS = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", PAGE, re.DOTALL)]
WORKFLOWS = [block for block in BLOCKS if "jobs" in block]
# the cluster.yml excerpt: the files the config names, which the workflows must write
(CONFIG,) = [block for block in BLOCKS if "ssh" in block]
PROSE = re.sub(r"```.*?```", "", PAGE, flags=re.DOTALL)
STATE = ".halo-cluster"  # the state folder beside the config (halo_cluster/config/state.py)
# what a command writes, in the state folder of the checkout's cluster.yml
WRITES = {
    "halo-cluster drift": (f"{STATE}/reports/drift.json", f"{STATE}/reports/drift.md"),
    "halo-cluster bench": (f"{STATE}/reports/bench", f"{STATE}/reports/bench/report.md"),
}
READ_BY_EVERY_COMMAND = "cluster.yml"  # the default config, in the checkout
RAY_TOKEN = f"{STATE}/ray-token"  # read when the cluster serves (serve.ray_token_file unset)


def config_files() -> set[str]:
    ssh, serve = CONFIG["ssh"], CONFIG.get("serve", {})
    named = {ssh["key"], ssh["known_hosts"], serve.get("api_key_file")}
    return {READ_BY_EVERY_COMMAND, *(name for name in named if name)} | (
        {RAY_TOKEN} if serve.get("enabled") else set()
    )


def written(run: str) -> set[str]:
    """The files a step's script writes (`> PATH`), and those its commands write."""
    found = set(re.findall(r">\s*([\w./-]+)", run))
    return found | {path for command, paths in WRITES.items() if command in run for path in paths}


def read(step: dict) -> set[str]:
    """The files a step reads itself: an artifact's path, a file it cats."""
    found = set()
    if str(step.get("uses", "")).startswith("actions/upload-artifact"):
        found.add(step["with"]["path"])
    for line in step.get("run", "").splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["cat"]:
            found.add(words[1])
    return found


def steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def test_the_page_has_the_drift_and_the_bench_workflows() -> None:
    assert [w["name"] for w in WORKFLOWS] == ["cluster drift", "cluster bench"]


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda w: w["name"])
def test_each_secret_a_workflow_uses_is_named_in_the_text(workflow: dict) -> None:
    used = set(re.findall(r"secrets\.(\w+)", yaml.safe_dump(workflow)))
    assert used, workflow["name"]
    assert not {name for name in used if f"`{name}`" not in PROSE}


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda w: w["name"])
def test_each_file_a_workflow_reads_is_written_by_an_earlier_step(workflow: dict) -> None:
    before: set[str] = set()
    missing = []
    for step in steps(workflow):
        run = step.get("run", "")
        needs = read(step) | (config_files() if "halo-cluster " in run else set())
        missing += [f"{step.get('name', step.get('uses'))}: {path}" for path in needs - before]
        before |= written(run)
    assert not missing, missing


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda w: w["name"])
def test_the_secret_files_are_written_0600(workflow: dict) -> None:
    """`umask 077` before the files are written: none is ever readable by another user."""
    (writer,) = [s for s in steps(workflow) if "secrets." in yaml.safe_dump(s)]
    lines = writer["run"].splitlines()
    assert lines[0].split("#")[0].strip() == "umask 077"
    assert config_files() <= written(writer["run"])


def test_no_workflow_reads_the_checkouts_git_ignored_files_unwritten() -> None:
    """What .gitignore keeps out of the checkout is what a fresh runner lacks."""
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "cluster.yml" in ignored
    assert [p for p in ignored if p.startswith(f"{STATE}/")], ignored  # the token, the reports
    for workflow in WORKFLOWS:
        pushed = workflow[True].get("push", {}).get("paths", [])  # YAML 1.1 reads `on` as True
        assert "cluster.yml" not in pushed, workflow["name"]
