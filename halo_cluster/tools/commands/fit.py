"""`halo-cluster fit MODEL`: whether a model fits this cluster, before any download
(halo_cluster/decide/fitestimate.py, halo_cluster/tools/fitmodel.py; docs/models.md)."""

from __future__ import annotations

import sys

from halo_cluster.tools.commands import exits, text

NAME = "fit"
PROG = f"halo-cluster {NAME}"
SUMMARY = "whether a model fits this cluster, from its config.json, before any download"
OPTIONS = (
    ("--tp N", "tensor parallel size (else serve.tensor_parallel_size)"),
    ("--pp M", "pipeline stages (else serve.pipeline_parallel_size)"),
    ("--max-model-len L", "tokens per sequence (else serve.max_model_len, else the model's)"),
    ("--concurrency C", "sequences at once at that length (else 1, as vLLM checks)"),
    ("--json", "the same as one JSON document, for scripts"),
)
HELP = text.page(
    "halo-cluster fit [MODEL] [--tp N] [--pp M] [--max-model-len L] [--concurrency C] [--json]",
    """
Reads only MODEL's config.json and its safetensors index (a folder; a hub id in this machine's
Hugging Face cache; else those two files from the hub), never its weights, and says for this
config's memory (kernel.gtt_gib x serve.gpu_memory_utilization per node, the deploy's memory
budget) the weights per node, the KV cache per token with vLLM's arithmetic, whether it fits,
the largest max_model_len at that concurrency and the smallest TP x PP that fits on this
cluster's nodes. MODEL defaults to serve.model. Activations and graph memory are not counted:
a model that fits with nothing to spare may still be refused by vLLM at start.""",
    OPTIONS,
    NAME,
    "halo-cluster fit Qwen/Qwen3-30B-A3B --max-model-len 32768 --concurrency 4",
)


def _positive(value: str) -> str | None:
    return None if value.isdigit() and int(value) > 0 else "must be a positive integer"


def main(argv: list[str]) -> int:
    from halo_cluster.tools import fitreport, options, project

    parser = options.parser(PROG, None, exits.ERROR)
    parser.add_argument("model", nargs="?", metavar="MODEL")
    for option, _ in OPTIONS[:4]:
        name, metavar = option.split(" ")
        parser.value(name, metavar, "", rule=_positive)
    parser.flag("--json", "one JSON document")
    args = parser.parse_args(argv)
    cluster = project.load_or_say(project.config())
    if cluster is None:
        return exits.BAD_CONFIG
    model = args.model or cluster.serve.model
    if not model:
        parser.refuse("no MODEL given and no serve.model in the config")
    found = fitreport.run(cluster, model, args)
    if isinstance(found, str):
        print(f"{PROG}: {found}", file=sys.stderr)
        return exits.ERROR
    print(found.render(args.json))
    return exits.OK if found.fits else exits.NO_FIT
