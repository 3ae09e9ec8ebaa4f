"""The node's own series planned (roles/metrics/textfile.py): with metrics on, every node gets
the script, its service and timer, the script naming that node's data interface, network.mtu
and the cluster user's quadlets, and the timer enabled and run once; converged, nothing;
metrics off, all removed."""

from __future__ import annotations

import re

from halo_cluster.roles.metrics import textfile
from tests.plan.harness import Plan, plan
from tests.plan.nodes import serve_cluster, user_node

ON = "metrics: {enabled: true}\nmtu: 9000\n"
WRITE = "Metrics | Write the node's own series now and every minute (halo-metrics-textfile)"


def textfile_plan(top: str, tmp_path, files=None) -> Plan:
    cluster = serve_cluster(tmp_path=tmp_path, top=top)
    return plan(cluster, {n.name: user_node(files=dict(files or {})) for n in cluster.nodes})


def test_every_node_writes_its_data_interface_and_the_mtu(tmp_path) -> None:
    result = textfile_plan(ON, tmp_path)
    for node in ("halo1", "halo2"):
        script = result.uploads(node)[textfile.SCRIPT]
        line = re.search(r"^  printf .* halo_data_link_mtu_bytes .*$", script, re.M).group(0)
        assert line.endswith(" 9000") and "'\"" not in line, line
        assert "for name in halo-ray halo-vllm; do" in script
        # the services the node runs: their quadlets in the cluster user's home
        assert "\nquadlets=/home/vllm/.config/containers/systemd\n" in script
        timer = result.uploads(node)[textfile.FILES["timer"][0]]
        assert "OnUnitActiveSec=60s" in timer
        assert WRITE in [op.name for op in result.ops[node]]


def test_converged_it_changes_nothing_and_off_it_goes(tmp_path) -> None:
    first = textfile_plan(ON, tmp_path).uploads("halo1")
    files = {path: (first[path], mode) for path, _, mode in textfile.FILES.values()}
    files[textfile.SERIES] = ("", "644")
    again = textfile_plan(ON, tmp_path, files)
    assert not [op.name for op in again.ops["halo1"] if "textfile" in op.name and op.commands]
    off = textfile_plan("", tmp_path, files)
    removed = next(c for c in off.commands("halo1") if c.startswith("rm -f "))
    assert textfile.SCRIPT in removed and textfile.SERIES in removed
