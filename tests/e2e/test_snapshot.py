"""`python -m lab snapshot NAME` and `python -m lab restore NAME` on the serving lab (issue 42):
the restored lab is the one saved, with no deploy run: drift 0, vLLM's /health 200 and the same
image digest on every node and in the lock, and what changed after the save (a file on a node's
root, a stopped service, a file in the cluster user's home, the lab's config, a new build in the
registry under `latest`) gone again. The
serving lab is changed (`serving`) and left as restored: the lab it was before the test."""

from __future__ import annotations

import time

from lab import cli
from tests.e2e.conftest import Lab
from tests.e2e.helpers_cluster import HALO_CLUSTER, INSPECT, cluster_digest, run
from tests.e2e.serving_lab import user, wait_serving

NAME = "e2e-snapshot-test"  # the test's own: the suite's states keep theirs


def images(lab: Lab) -> dict[str, str]:
    return {node: user(lab, node, INSPECT).strip() for node in lab.nodes}


def latest(lab: Lab) -> str:
    """The digest the lab's registry names `latest` (as every node's pull resolves it)."""
    inspect = (
        f"skopeo inspect --tls-verify=false --format '{{{{.Digest}}}}' docker://{cli.SEED_NAME}"
    )
    return lab.ssh("node1", inspect).strip()


def builds() -> str:
    """The lab's record of the builds it published (`python -m lab publish-image`)."""
    return cli.BUILDS.read_text() if cli.BUILDS.exists() else ""


def changed_after_the_save(lab: Lab) -> None:
    lab.lab("publish-image")  # the registry's `latest` moves; .lab/builds.json counts the build
    lab.ssh("node1", "echo after > /root/after-the-save")
    user(lab, "node2", "touch ~vllm/after-the-save")
    user(lab, "node2", "systemctl --user stop halo-ray")
    cli.CONFIG.write_text(cli.CONFIG.read_text() + "# after the save\n")


def test_a_restored_serving_lab_is_the_one_saved(serving: Lab) -> None:
    lab = serving
    config = cli.LAB_DIR / "cluster-extra.yml"
    before, digest, tagged, published = images(lab), cluster_digest(config), latest(lab), builds()
    started = time.monotonic()
    lab.lab("snapshot", NAME)
    saved = time.monotonic() - started
    wait_serving(lab)  # the saved lab boots again on what was saved, and serves
    try:
        changed_after_the_save(lab)
        started = time.monotonic()
        result = lab.lab("restore", NAME)
        restored = time.monotonic() - started
        assert f"lab: restored {NAME} in" in result.stdout, result.stdout
        gone = "ls /root/after-the-save 2>/dev/null || echo gone"
        assert lab.ssh("node1", gone).strip() == "gone"
        assert (
            user(lab, "node2", "ls ~vllm/after-the-save 2>/dev/null || echo gone").strip() == "gone"
        )
        assert "# after the save" not in cli.CONFIG.read_text()
        assert latest(lab) == tagged and builds() == published
        later = wait_serving(lab)
        assert images(lab) == before
        assert cluster_digest(config) == digest
        drift = run([HALO_CLUSTER, "drift", "--config", str(config)], config)
        assert drift.returncode == 0, drift.stdout + drift.stderr
        print(f"saved in {saved:.1f} s, restored in {restored:.1f} s, serving {later:.1f} s on")
    finally:
        lab.lab("forget", NAME)
