"""The image upgrade's bench gate (docs/bench.md, "The upgrade gate"): the build being left is
measured just before the switch and the new one just after, `bench.gate_runs` runs each with the
same workload, every run kept like any run of `halo-cluster bench`; the new build fails only
when it is slower than the old one by more than both `bench.tolerance` and the runs' own spread
(`results.gate_result`). Neither function raises: the upgrade rolls back on a failed gate,
so an exception would leave the trial."""

from __future__ import annotations

from pathlib import Path

from halo_cluster.config import lock as locks
from halo_cluster.config.loader import ConfigError
from halo_cluster.config.model import Cluster
from halo_cluster.tools import project
from halo_cluster.tools.bench import results, run, store
from halo_cluster.tools.bench.results import FAILED, MEASURED, GateResult, Side


def runs(config: str | Path, side: str, folder: Path | None = None) -> Side:
    """The serving build measured `bench.gate_runs` times (`side`: `old` or `new`, in the run
    ids); `skipped` with `bench.gate: false`, `failed` with why a run could not measure."""
    try:
        cluster = project.load(config)
    except ConfigError as error:
        return Side(FAILED, error.problems[0])
    return _runs(cluster, side, folder or run.reports())


def _runs(cluster: Cluster, side: str, folder: Path) -> Side:
    if not cluster.bench.gate:
        return Side("skipped", "bench.gate: false")
    # one id per run (the run's result file in the container, its index and history lines)
    ids = tuple(f"{locks.RUN}-{side}{n}" for n in range(1, cluster.bench.gate_runs + 1))
    try:
        kept = run.measure(cluster, folder, ids)
    except run.BenchError as error:
        return Side(FAILED, str(error))
    except OSError as error:  # reports/ not writable (a node's failure is a BenchError)
        return Side(FAILED, str(error))
    return Side(MEASURED, lines=tuple(line for line, _ in kept))


def gate(
    config: str | Path, left: Side | None, baseline_digest: str, folder: Path | None = None
) -> GateResult:
    """The new build's runs against `left`, the runs of the build being left. `left` None: an
    interrupted upgrade gated again, whose build being left no longer serves; its latest kept
    runs on `baseline_digest` stand in (those the interrupted upgrade took before its switch),
    and with none the gate passes as `baseline`."""
    folder = folder or run.reports()
    try:
        cluster = project.load(config)
    except ConfigError as error:
        return GateResult(FAILED, error.problems[0])
    if left is not None and left.status != MEASURED:
        return GateResult(left.status, left.reason)
    new = _runs(cluster, "new", folder)
    if new.status != MEASURED:
        return GateResult(new.status, new.reason)
    config_id = new.lines[0]["config_id"]
    old = left.lines if left is not None else kept_runs(folder, config_id, baseline_digest, new)
    if not old:
        return GateResult("baseline", f"baseline (no run of config {config_id} on the build left)")
    return results.gate_result(list(old), list(new.lines), cluster.bench.tolerance)


def kept_runs(folder: Path, config_id: str, digest: str, new: Side) -> tuple[dict, ...]:
    """The latest kept runs of `config_id` on `digest`, as many as the new side has (every
    verdict: each is a measurement of that build, whatever the run before it measured)."""
    lines = [x for x in store.read_index(folder) if x["config_id"] == config_id]
    return tuple([x for x in lines if x["image_digest"] == digest][-len(new.lines) :])
