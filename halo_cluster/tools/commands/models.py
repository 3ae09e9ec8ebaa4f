"""`halo-cluster models`: the model recipes, what each needs and whether this cluster has it
(halo_cluster/tools/recipes.py; docs/models.md, Recipes)."""

from __future__ import annotations

import sys
from pathlib import Path

from halo_cluster.tools.commands import exits, text

NAME = "models"
PROG = f"halo-cluster {NAME}"
SUMMARY = "the model recipes: what each needs, whether this cluster has it"
OPTIONS = (("--json", "the same as one JSON document, for scripts"),)
HELP = text.page(
    "halo-cluster models [--json]",
    """
Lists the model recipes `serve.recipe: NAME` can name: the shipped ones and yours
(recipes/NAME.yml beside the config, which wins over a shipped one of the same name), each with
its model, the revision its flags were published for, TP x PP and the nodes it needs (one GPU
each), and whether this config's cluster has them. It reads only the config and the recipes:
it contacts no node and writes nothing.""",
    OPTIONS,
    NAME,
    "halo-cluster models --json",
)


def main(argv: list[str]) -> int:
    from halo_cluster.config.model import ConfigError
    from halo_cluster.tools import jsonout, options, project, recipes

    parser = options.parser(PROG, None, exits.ERROR)
    parser.flag("--json", "the same as one JSON document")
    args = parser.parse_args(argv)
    config = project.config()
    cluster = project.load_or_say(config)
    if cluster is None:
        return exits.BAD_CONFIG
    try:
        found = recipes.rows(cluster, Path(config))
    except ConfigError as error:  # a recipe of yours the loader would refuse
        print("\n".join(error.problems), file=sys.stderr)
        return exits.ERROR
    if args.json:
        jsonout.emit(NAME, {"exit_code": exits.OK, **recipes.document(cluster, found)})
    else:
        print("\n".join(recipes.lines(cluster, found, config)))
    return exits.OK
