"""`halo-cluster bench` with `serve.launcher: native`: it runs in the head's `halo-vllm` as with
Ray (no Ray read), and the launcher is in the run's key, so a run on each launcher is its own
configuration and `--compare` says the launcher changed (issue 36: measured side by side)."""

from __future__ import annotations

from halo_cluster.tools.bench import results, run, store
from tests.unit.helpers_native import NATIVE, RAY


def test_the_launcher_is_in_the_key_and_said_when_it_changed() -> None:
    native, ray = store.serve_values(NATIVE), store.serve_values(RAY)
    assert native["launcher"] == "native" and ray["launcher"] == "ray"
    changed = results.changes({"serve": ray}, {"serve": native})
    assert "serve.launcher: ray -> native" in changed


def test_the_head_is_read_as_with_ray() -> None:
    head = run.gather_commands(NATIVE, NATIVE.head)
    assert set(head) == set(run.gather_commands(RAY, RAY.head))
    assert "halo-vllm" in head["images"] and "halo-ray" not in " ".join(head.values())
