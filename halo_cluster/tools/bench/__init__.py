"""`halo-cluster bench`: the image's own `vllm bench serve` against the serving cluster, each run
kept and compared with the previous run of its configuration (docs/bench.md).

    run.py      the run on the cluster, and its `main` (commands/bench.py); `measure`, also the
                image upgrade's
    store.py    what a run is kept as: its key, its record, index.jsonl, report.md, chart.svg
    results.py  what the bench keeps and decides without a cluster: ids, levels, the verdict
    chart.py    chart.svg, written by hand
    view.py     what bench says: the tables, the verdict, `--compare`, `--json`
    gate.py     the image upgrade's bench gate: both builds' runs compared (results.gate_result)
"""
