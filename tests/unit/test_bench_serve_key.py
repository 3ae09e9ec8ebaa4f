"""The bench's key takes the serve section from the schema the config was loaded with: every
serve key that reaches vLLM or Ray is in it, a key added to the section is in it without an edit
of the tool, and a key is left out only with its reason (`Field.unmeasured`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from halo_cluster import roles
from halo_cluster.config.loader import load_cluster
from halo_cluster.config.schema import Field, Schema, use
from halo_cluster.roles.serve import flags
from halo_cluster.roles.serve.schema import SECTION
from halo_cluster.tools import project
from halo_cluster.tools.bench import results, store
from tests.unit.configs import VALID_ROCE, write

ROOT = Path(__file__).resolve().parents[2]
SERVING = VALID_ROCE + "serve: {enabled: true, model: Qwen/Qwen3-14B%s}\n"
HEAD = store.Head(digest="sha256:" + "a" * 64, revision="b" * 40, lab=False, nodes={})
PATHS = {f.path: f for f in SECTION if f.type != "mapping"}


def serve_key(folder: Path, extra: str = "") -> dict:
    """The key of a serving config, loaded with the schema in use (not `project.load`, which
    puts the roles' own schema back)."""
    return store.key(load_cluster(write(folder, SERVING % extra)), HEAD)


@pytest.fixture
def schema_with() -> Iterator:
    """Use the roles' schema with one more serve key; the roles' own afterwards."""

    def add(field: Field) -> None:
        base = roles.schema()
        use(Schema((*base.fields, field), base.derivations))

    yield add
    use(roles.schema())


def test_the_key_holds_every_serve_key_but_those_with_a_reason(tmp_path) -> None:
    found = store.key(project.load(write(tmp_path, SERVING % "")), HEAD)
    measured = {p.removeprefix("serve.") for p, f in PATHS.items() if not f.unmeasured}
    own = {"image_digest", "revision", "nodes", "workload", "lab"}
    assert set(found) == measured | own and not measured & own
    # a derived default as the deploy resolves it: one GPU per node, the link's transport
    assert found["tensor_parallel_size"] == 2 and found["transport"] == "rdma"
    assert found["served_model_name"] == "Qwen/Qwen3-14B"
    assert {"nccl_debug", "object_store_mib"} <= set(found)  # left out by the hand list before
    left_out = {p for p, f in PATHS.items() if f.unmeasured}
    assert left_out == {
        "serve.enabled", "serve.port", "serve.listen", "serve.api_key_file",
        "serve.hf_token_file", "serve.ray_token_file", "serve.ready_timeout", "serve.wait",
        "serve.download", "serve.master_port", "serve.watchdog_enabled",
        "serve.watchdog_timeout_seconds", "serve.watchdog_interval_seconds",
        "serve.watchdog_misses", "serve.watchdog_max_restarts_per_hour", "serve.recipe",
    }  # fmt: skip


def test_a_serve_key_added_to_the_section_changes_the_key(tmp_path, schema_with) -> None:
    schema_with(Field("serve.speculative_tokens", "integer", None, "A new vLLM setting."))
    plain, tuned = serve_key(tmp_path), serve_key(tmp_path, ", speculative_tokens: 4")
    assert plain["speculative_tokens"] is None and tuned["speculative_tokens"] == 4
    assert results.config_id(tuned) != results.config_id(plain)
    assert "speculative_tokens: None -> 4" in results.changes(plain, tuned)


def test_a_serve_key_with_a_reason_leaves_the_key_as_it_was(tmp_path, schema_with) -> None:
    schema_with(Field("serve.log_file", "string", None, "Where...", unmeasured="a path"))
    plain, logged = serve_key(tmp_path), serve_key(tmp_path, ", log_file: /tmp/x")
    assert "log_file" not in logged and logged == plain


@pytest.mark.parametrize("change", ["max_num_seqs: 8", "nccl_debug: true", "env: {A: '1'}"])
def test_a_measured_key_changes_the_configuration(tmp_path, change) -> None:
    plain = store.key(project.load(write(tmp_path, SERVING % "")), HEAD)
    changed = store.key(project.load(write(tmp_path, SERVING % f", {change}")), HEAD)
    assert results.config_id(changed) != results.config_id(plain)


def test_an_unmeasured_key_does_not(tmp_path) -> None:
    plain = store.key(project.load(write(tmp_path, SERVING % "")), HEAD)
    moved = store.key(project.load(write(tmp_path, SERVING % ", port: 8001, wait: false")), HEAD)
    assert results.config_id(moved) == results.config_id(plain)


def test_every_flag_the_deploy_passes_comes_from_a_serve_key() -> None:
    """Each flag `vllm serve` is given is rendered from a key of the section, or from a value
    derived from the key it names instead (`--host` from `serve.listen`): so the key holds it,
    or the key's field says why not. A flag from elsewhere must be decided on here."""
    for flag in flags.FLAGS:
        if flag.form == flags.REFUSED or flag.source is None:
            continue  # never passed, or the tool's constant (the same in every run)
        path = flag.source if flag.source in PATHS else flag.instead
        assert path in PATHS, f"--{flag.name} comes from {flag.source}, no serve key"


def test_a_stored_key_reads_back_equal(tmp_path) -> None:
    text = ", extra_args: ['--dtype=auto'], env: {B: '2', A: '1'}"
    found = store.key(project.load(write(tmp_path, SERVING % text)), HEAD)
    assert json.loads(json.dumps(found)) == found
    assert results.changes(json.loads(json.dumps(found)), found) == []


def test_the_bench_page_names_every_key_left_out() -> None:
    page = (ROOT / "docs" / "bench.md").read_text()
    key_section = page[page.index("### The key") : page.index("## Comparing")]
    for path, field in PATHS.items():
        if field.unmeasured:
            assert f"`{path.removeprefix('serve.')}`" in key_section, path
