"""drift names a node whose container runs another image than the cluster's, with both digests,
under that node's pending changes (the deploy's `image-mismatch` event), and exits 2."""

from __future__ import annotations

import json
import subprocess

from halo_cluster.tools import drift, jsonout
from halo_cluster.tools.commands import documents
from tests.recorded import container_image_line, skopeo_digest

PINNED = f"docker.io/kyuz0/vllm-therock-gfx1151@{skopeo_digest()}"
OTHER = "docker.io/kyuz0/vllm-therock-gfx1151@sha256:" + "ab" * 32


def summary(running: str) -> dict:
    plan = {"plan": [{"name": "Cluster services | Restart halo-ray", "hosts_with_change": ["n2"]}]}
    result = subprocess.CompletedProcess([], 0, stdout=json.dumps(plan), stderr="")
    events = [
        {"node": n, "kind": kind} for n in ("n1", "n2") for kind in ("reached", "planned")
    ] + [
        {
            "node": "n2",
            "kind": "image-mismatch",
            "container": "halo-ray",
            "running": running,
            "cluster": PINNED,
        }
    ]
    return drift.summarize(["n1", "n2"], result, events)


def test_another_digest_is_named_with_the_cluster_one() -> None:
    found = summary(OTHER)
    assert found["exit_code"] == drift.DRIFT
    lines = drift.report(found).splitlines()
    assert lines[:4] == [
        "n1: converged",
        "n2: 1 pending change(s)",
        f"  n2: halo-ray runs sha256:{'ab' * 32}, the cluster {skopeo_digest()}",
        "  - Cluster services | Restart halo-ray",
    ]


def test_a_container_made_from_a_tag_is_named_by_its_reference() -> None:
    tag = container_image_line().split()[1]  # the recorded inspect's ImageName
    assert f"halo-ray runs {tag}, the cluster" in drift.report(summary(tag))


def test_the_summary_is_the_documented_json_and_its_verdict_names_only_real_others() -> None:
    """Every node field as commands/documents.py declares it; an error's verdict says "the
    others are listed above" only when there are others (issue 45 items 10, 14)."""
    found = summary(OTHER)
    run = {"config_errors": [], "next_deploy": None, "left_out": [], "config": "cluster.yml"}
    assert documents.problems("drift", jsonout.whole("drift", found | run)) == []
    found["nodes"]["n1"].update(status=drift.REFUSED, reason="mgmt0 carries the SSH session")
    found["exit_code"], found["errors"] = drift.ERROR, ["n1: refused: ..."]
    assert drift.report(found).splitlines()[-1] == (
        "drift: error on 1 node(s); the other 1 are listed above"
    )
    found["nodes"] = {"n1": found["nodes"]["n1"]}
    assert drift.report(found).splitlines()[-1] == "drift: error on 1 node(s)"
