"""`halo-cluster bench`: the serving cluster benchmarked (halo_cluster/tools/bench.py)."""

from __future__ import annotations

from halo_cluster.tools.commands import text

NAME = "bench"
SUMMARY = "benchmark the serving cluster, keep and compare the results"
OPTIONS = (
    ("--compare", "compare the last two runs only, running nothing"),
    ("--json", "the report as one JSON document on stdout"),
)
HELP = text.page(
    "halo-cluster bench [--compare] [--json]",
    """
Runs vLLM's own benchmark inside the head's vLLM container against the serving cluster, at each
concurrency level of `bench.concurrency`, with the seeded random workload of `bench.*`. Every
result is kept under reports/bench/ in the state folder and compared with the previous run of
the same configuration (the same image, model, serve settings, kernel and firmware); a report.md
says the result. The API key never appears on a command line.""",
    OPTIONS,
    NAME,
    "halo-cluster bench",
)


def main(argv: list[str]) -> int:
    from halo_cluster.tools import bench

    return bench.main(argv)
