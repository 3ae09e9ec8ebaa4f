"""`halo-cluster status`: the serving cluster read in one batched read per node and shown in one
table (docs/architecture.md, Tools).

    read.py      what status reads on each node and the verdict (its exit code, `--json`'s node)
    live.py      the live numbers from Prometheus on the head
    ranks.py     `serve.launcher: native`: each node's rank in the head's world, no Ray read
    watchdog.py  the head's stall watchdog: its unit and its last restart
    view.py      what status shows, and its `main` (commands/status.py)
"""
