"""The model recipes as `halo-cluster models` shows them: each recipe (the user's, beside the
config, in place of a shipped one of its name), what it needs and whether this cluster has it.

A recipe needs TP x PP nodes, one GPU each: the serve role refuses a config whose TP x PP is not
its node count (roles/serve/model.py, which alone multiplies them), so a cluster has a recipe
when its nodes are that many.
The recipes are read by the config layer (config/presets.py), as `serve.recipe` reads them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from halo_cluster.config import docs, quoting
from halo_cluster.config.expansion import Expansion
from halo_cluster.config.loader import parse_cluster
from halo_cluster.config.model import Cluster
from halo_cluster.config.presets import Preset, available
from halo_cluster.config.schema import current
from halo_cluster.config.yamlread import parse_yaml, read_config
from halo_cluster.tools.where import shown

KEY = "serve.recipe"  # the serve role's key naming a recipe (roles/serve/schema.py)


@dataclass(frozen=True)
class Row:
    """One recipe and this cluster: whether it has the nodes, else why not."""

    preset: Preset
    nodes: int
    tp: int
    pp: int
    why: str | None  # None when this cluster has it

    def document(self) -> dict:
        keys = self.preset.keys
        return {
            "name": self.preset.name,
            "summary": self.preset.summary,
            "model": keys["model"],
            "revision": self.preset.revision,
            "tensor_parallel_size": self.tp,
            "pipeline_parallel_size": self.pp,
            "nodes": self.nodes,
            "file": shown(str(self.preset.path)),
            "shipped": self.preset.shipped,
            "fits": self.why is None,
            "why": self.why,
        }


def expansion() -> Expansion:
    """The serve role's recipes, as the schema in use declares them (`project.load` set it)."""
    return next(e for e in current().expansions if e.key == KEY)


def rows(cluster: Cluster, config: Path) -> list[Row]:
    """Every recipe with this cluster's verdict; ConfigError naming a recipe file it refused.

    What a recipe needs is the serve derivation's own product (`cluster.serve.gpus`): this
    config with its serve section the recipe alone, serving off (the check of TP x PP against
    the nodes is the serving config's, which a recipe that does not fit would fail)."""
    label = quoting.path(str(config))
    raw, written = parse_yaml(read_config(config, label), label)
    count = len(cluster.nodes)
    found = []
    for preset in available(expansion(), config.parent):
        doc = copy.deepcopy(raw) | {"serve": {"recipe": preset.name}}
        serve = parse_cluster(doc, label, config.parent, written).serve
        needs = serve.gpus
        why = None if needs == count else f"needs {_nodes(needs)}, the cluster has {count}"
        tp, pp = serve.tensor_parallel_size, serve.pipeline_parallel_size
        found.append(Row(preset, needs, tp, pp, why))
    return found


def _nodes(count: int) -> str:
    return f"{count} node{'s' if count != 1 else ''}"


def in_use(cluster: Cluster) -> str | None:
    return cluster.settings.get(KEY)


def document(cluster: Cluster, found: list[Row]) -> dict:
    return {
        "nodes": len(cluster.nodes),
        "in_use": in_use(cluster),
        "recipes": [row.document() for row in found],
    }


def lines(cluster: Cluster, found: list[Row], config: str) -> list[str]:
    """A table of the recipes, then how to use one."""
    header = ("recipe", "model", "TP x PP", "nodes", "revision", "this cluster")
    table = [header]
    for row in found:
        mark = "" if row.preset.shipped else " (yours)"
        verdict = "yes" if row.why is None else f"no: {row.why}"
        if row.preset.name == in_use(cluster):
            verdict += " (in use)"
        table.append(
            (
                row.preset.name + mark,
                str(row.preset.keys["model"]),
                f"{row.tp} x {row.pp}",
                str(row.nodes),
                row.preset.revision,
                verdict,
            )
        )
    widths = [max(len(cells[i]) for cells in table) for i in range(len(header) - 1)]
    out = [
        "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=False))
        + "  "
        + cells[-1]
        for cells in table
    ]
    folder = Path(shown(config)).parent / expansion().folder
    return [
        *out,
        f"{_nodes(len(cluster.nodes))} in {shown(config)}. Use one: `{KEY}: NAME` in the serve "
        f"section (your keys win); your own recipes: {folder}/NAME.yml ({docs.page('models.md')}).",
    ]


def markdown_table(presets: list[Preset]) -> str:
    """docs/models.md's table of the shipped recipes (tests/unit/test_recipes.py keeps it)."""
    rows = ["| recipe | model | TP x PP | vLLM flags | what it is |", "|---|---|---|---|---|"]
    for p in presets:
        tp, pp = p.keys["tensor_parallel_size"], p.keys.get("pipeline_parallel_size") or 1
        eager = ["--enforce-eager"] if p.keys.get("enforce_eager") else []
        flags = ", ".join(f"`{flag}`" for flag in [*eager, *p.keys.get("extra_args", ())])
        rows.append(f"| `{p.name}` | `{p.keys['model']}` | {tp} x {pp} | {flags} | {p.summary} |")
    return "\n".join(rows)
