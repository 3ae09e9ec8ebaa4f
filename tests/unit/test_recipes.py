"""Model recipes (`serve.recipe: NAME`, config/presets.py, roles/serve/recipes/): each shipped one
passes the loader as a config using it, the user's keys win, every key a recipe sets meets the
rules a written one does (an owned vLLM flag refused, naming the recipe's file), the user's own
recipe beside the config wins over a shipped one, and `halo-cluster models` lists them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from halo_cluster.config.loader import load_cluster
from halo_cluster.config.presets import available
from halo_cluster.config.schema import current
from halo_cluster.roles.serve.schema import EXPANSION, RECIPE_KEYS
from halo_cluster.tools import cli, recipes
from halo_cluster.tools.commands import documents, exits
from tests.unit.configs import VALID_ROCE, problems, write

SHIPPED = sorted(EXPANSION.shipped.glob("*.yml"))
ONE_NODE = """\
cluster_user: vllm
nodes:
  - {name: halo1, ssh: {host: 10.0.0.11}, data: {interface: enp1s0f0np0}}
"""
MINE = """\
summary: mine
serve:
  model: org/mine
  tensor_parallel_size: 1
  extra_args: [--dtype=bfloat16]
"""


def serving(base: str, serve: str) -> str:
    return base + "serve:\n  enabled: true\n" + serve


def mine(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / "recipes"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.yml"
    path.write_text(text)
    return path


def test_four_recipes_ship_and_their_keys_are_the_serve_sections() -> None:
    assert [p.stem for p in SHIPPED] == [
        "gpt-oss-120b-tp2",
        "qwen2.5-7b-instruct",
        "qwen3-14b-awq",
        "qwen3-30b-a3b-instruct-2507",
    ]
    assert set(RECIPE_KEYS) <= set(current().children_of("serve"))
    assert current().by_path["serve.recipe"].rule is not None


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_recipe_loads_as_a_config_and_cites_each_setting(
    path: Path, tmp_path: Path
) -> None:
    recipe = yaml.safe_load(path.read_text())
    keys = recipe["serve"]
    base = ONE_NODE if keys["tensor_parallel_size"] * keys["pipeline_parallel_size"] == 1 else None
    cluster = load_cluster(write(tmp_path, serving(base or VALID_ROCE, f"  recipe: {path.stem}\n")))
    assert cluster.serve.model == keys["model"]
    assert cluster.serve.extra_args == tuple(keys["extra_args"])
    assert cluster.serve.gpu_memory_utilization == keys["gpu_memory_utilization"] == 0.9
    assert cluster.serve.tensor_parallel_size == keys["tensor_parallel_size"]
    assert cluster.warnings == ()  # revision main: nothing pinned that the deploy would not fetch
    # every setting and every vLLM flag has its source, and the revision is said
    assert set(recipe["sources"]) == set(keys) - {"extra_args"} | set(keys["extra_args"])
    assert all(len(source) > 20 for source in recipe["sources"].values())
    assert recipe["revision"] == "main" and "NOT VERIFIED" in path.read_text()


def test_the_users_keys_win_and_the_rest_are_the_recipes(tmp_path: Path) -> None:
    serve = "  recipe: qwen3-14b-awq\n  max_model_len: 8192\n  extra_args: [--dtype=bfloat16]\n"
    cluster = load_cluster(write(tmp_path, serving(ONE_NODE, serve)))
    assert cluster.serve.model == "Qwen/Qwen3-14B-AWQ"
    assert cluster.serve.max_model_len == 8192
    assert cluster.serve.extra_args == ("--dtype=bfloat16",)  # a list is replaced whole
    assert cluster.serve.enforce_eager is True
    assert cluster.settings["serve.recipe"] == "qwen3-14b-awq"


def test_a_recipe_is_checked_against_the_cluster_as_a_written_key_is(tmp_path: Path) -> None:
    """gpt-oss-120b-tp2 needs two nodes: on one the serve role's TP x PP rule refuses it."""
    found = problems(tmp_path, serving(ONE_NODE, "  recipe: gpt-oss-120b-tp2\n"))
    assert found == [
        f"{tmp_path / 'cluster.yml'}: serve.tensor_parallel_size: TP 2 x PP 1 = 2 GPUs, but the "
        "cluster has 1 "
        "nodes with one GPU each: TP x PP must equal the number of nodes (serve.recipe "
        "gpt-oss-120b-tp2: see halo-cluster models)"
    ]


def test_an_owned_flag_in_a_recipe_is_refused_naming_its_file(tmp_path: Path) -> None:
    path = mine(tmp_path, "ported", MINE.replace("--dtype=bfloat16", "--port=9000"))
    found = problems(tmp_path, serving(ONE_NODE, "  recipe: ported\n"))
    assert found == [
        f"{path}: serve.extra_args[0]: '--port=9000' sets what the tool owns: use serve.port"
    ]


def test_a_recipe_sets_no_key_of_the_cluster_and_names_only_what_it_sets(tmp_path: Path) -> None:
    text = MINE + "  listen: all\n  bogus: 1\nsources: {--trust-remote-code: a source}\n"
    path = mine(tmp_path, "wide", text)
    assert problems(tmp_path, serving(ONE_NODE, "  recipe: wide\n")) == [
        f"{path}: serve.listen: not a key a recipe sets ({', '.join(RECIPE_KEYS)})",
        f"{path}: serve.bogus: unknown key (known keys: {', '.join(sorted(current().children_of('serve')))})",  # noqa: E501
        f"{path}: sources.--trust-remote-code: names nothing the recipe sets",
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[1, 2]", "expected a mapping with serve: and summary, revision, sources"),
        (
            "serve: {model: org/m, tensor_parallel_size: 1, extra_args: [{a: 1}]}",
            "serve.extra_args: expected list of strings, got list [{'a': 1}]",
        ),
        (
            "serve: {model: org/m, tensor_parallel_size: 1}\nfrom: me",
            "from: unknown key (known keys: serve, summary, revision, sources)",
        ),
        ("serve: {model: org/m}", "serve.tensor_parallel_size: required in a recipe"),
        (
            "serve: {model: org/m, model: org/n, tensor_parallel_size: 1}",
            "line 1, column 23: YAML error: duplicate key 'model'",
        ),
    ],
)
def test_a_malformed_recipe_is_one_line_naming_its_file(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = mine(tmp_path, "bad", text)
    assert problems(tmp_path, serving(ONE_NODE, "  recipe: bad\n")) == [f"{path}: {problem}"]


def test_an_unknown_recipe_is_one_line_with_the_known_names(tmp_path: Path) -> None:
    mine(tmp_path, "mine", MINE)
    assert problems(tmp_path, serving(ONE_NODE, "  recipe: qwen9\n")) == [
        f"{tmp_path / 'cluster.yml'}: serve.recipe: 'qwen9' is not a recipe (known: "
        "gpt-oss-120b-tp2, mine, "
        "qwen2.5-7b-instruct, qwen3-14b-awq, qwen3-30b-a3b-instruct-2507; yours would be "
        "recipes/qwen9.yml beside the config)"
    ]


def test_a_recipe_name_is_never_a_path(tmp_path: Path) -> None:
    assert problems(tmp_path, serving(ONE_NODE, "  recipe: ../cluster\n")) == [
        f"{tmp_path / 'cluster.yml'}: serve.recipe: '../cluster' is not a name: "
        "lower-case letters, digits, "
        "'.', '_', '-', at most 64"
    ]


def test_the_users_recipe_wins_over_a_shipped_one_of_its_name(tmp_path: Path) -> None:
    mine(tmp_path, "qwen3-14b-awq", MINE)
    cluster = load_cluster(write(tmp_path, serving(ONE_NODE, "  recipe: qwen3-14b-awq\n")))
    assert cluster.serve.model == "org/mine"
    assert cluster.serve.extra_args == ("--dtype=bfloat16",)
    assert cluster.serve.gpu_memory_utilization == 0.9  # the schema's default, not the recipe's


def test_a_pinned_revision_warns_that_the_deploy_fetches_main(tmp_path: Path) -> None:
    mine(tmp_path, "pinned", MINE + f"revision: {'a' * 40}\n")
    cluster = load_cluster(write(tmp_path, serving(ONE_NODE, "  recipe: pinned\n")))
    assert cluster.warnings == (
        f"{tmp_path / 'cluster.yml'}: serve.recipe: warning: pinned names revision "
        f"{'a' * 40}: the deploy "
        "fetches the hub's main",
    )
    mine(tmp_path, "pinned", MINE + "revision: v1\n")
    found = problems(tmp_path, serving(ONE_NODE, "  recipe: pinned\n"))
    assert found == [
        f"{tmp_path / 'recipes/pinned.yml'}: revision: 'v1' is neither main nor a 40-digit commit"
    ]


def models(config: Path, *args: str) -> int:
    return cli.main(["--config", str(config), "models", *args])


def test_models_lists_each_recipe_and_whether_this_cluster_has_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine(tmp_path, "mine", MINE)
    config = write(tmp_path, serving(ONE_NODE, "  recipe: mine\n"))
    assert models(config) == exits.OK
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        "recipe",
        "model",
        "TP",
        "x",
        "PP",
        "nodes",
        "revision",
        "this",
        "cluster",
    ]
    rows = {line.split()[0]: line for line in out[1:-1]}
    names = [p.stem for p in SHIPPED]
    assert list(rows) == [names[0], "mine", *names[1:]]
    assert rows["gpt-oss-120b-tp2"].endswith("no: needs 2 nodes, the cluster has 1")
    assert rows["mine"].split()[1:4] == ["(yours)", "org/mine", "1"]
    assert rows["mine"].endswith("  yes (in use)")
    assert rows["qwen3-14b-awq"].endswith("  yes")
    assert out[-1].startswith(f"1 node in {config}. Use one: `serve.recipe: NAME`")


def test_models_json_is_its_declared_document(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, VALID_ROCE)
    assert models(config, "--json") == exits.OK
    found = json.loads(capfd.readouterr().out)
    assert documents.problems("models", found) == [], found
    assert found["in_use"] is None and found["nodes"] == 2
    fits = {r["name"]: (r["fits"], r["nodes"], r["shipped"]) for r in found["recipes"]}
    assert fits["gpt-oss-120b-tp2"] == (True, 2, True)
    assert fits["qwen3-14b-awq"] == (False, 1, True)


def test_models_refuses_a_bad_recipe_of_yours_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = mine(
        tmp_path, "broken", MINE.replace("tensor_parallel_size: 1", "tensor_parallel_size: 0")
    )
    assert models(write(tmp_path, VALID_ROCE)) == exits.ERROR
    err = capsys.readouterr().err
    assert err.splitlines() == [f"{path}: serve.tensor_parallel_size: 0 is outside 1-1000000000"]


def test_the_docs_table_is_the_shipped_recipes(tmp_path: Path) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    shipped = available(EXPANSION, tmp_path)  # no recipes/ folder there: the shipped ones alone
    assert [p.name for p in shipped] == [p.stem for p in SHIPPED]
    assert recipes.markdown_table(shipped) in page
