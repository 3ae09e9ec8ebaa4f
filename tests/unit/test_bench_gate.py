"""The image upgrade's bench gate (halo_cluster/tools/bench/gate.py, results.gate_result):
noise against a slower build, with the issue's own numbers; the spread rule; failed requests;
`bench.gate_runs`; the gate's sides without a cluster (the runs themselves are the lab's,
tests/e2e/test_upgrade.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.config.loader import ConfigError
from halo_cluster.tools import project, transport
from halo_cluster.tools.bench import gate, results, run, store
from halo_cluster.tools.bench.results import GateResult, Side, gate_result, spread
from tests.recorded import skopeo_digest
from tests.unit.configs import VALID_ROCE, write
from tests.unit.helpers_bench import SILENT, fake_ssh

SERVING = VALID_ROCE + "serve: {enabled: true, model: Qwen/Qwen3-14B}\n"
OLD, NEW = skopeo_digest(), "sha256:" + "b" * 64


def runs(*throughputs: float, failed: int = 0, level: str = "8", digest: str = NEW) -> list:
    """Index lines, one per run, of one level's output tokens/s."""
    return [
        {"config_id": "c0nf1g", "image_digest": digest,
         "levels": {level: {"output_throughput": value, "failed": failed}}}
        for value in throughputs
    ]  # fmt: skip


# ---- the comparison


def test_the_issues_busy_minute_is_noise_its_spread_explains() -> None:
    """2,836 against 3,494 (-18.8 %, which one run against one rolled back): the new build's
    runs disagree by 36.7 % among themselves, so the fall says nothing of the build."""
    result = gate_result(runs(3494, 3420, 3560), runs(2836, 2410, 3450), tolerance=10)
    assert result.status == "passed" and result.reason == ""
    assert result.said == (
        "bench gate: concurrency 8: output tokens/s 2,836 (new, median of 3) against 3,494 "
        "(old, median of 3), -18.8 %, spread 36.7 %, tolerance 10 %: pass",
    )


def test_a_build_ten_times_slower_fails_whatever_the_noise() -> None:
    result = gate_result(runs(3494, 3410, 3520), runs(349, 341, 352), tolerance=10)
    assert result.status == "failed"
    assert result.reason == (
        "concurrency 8: output tokens/s 349 (new, median of 3) against 3,494 (old, median of 3), "
        "-90.0 %, spread 3.2 %, tolerance 10 %: fail"
    )
    assert result.said == (f"bench gate: {result.reason}",)


def test_the_line_says_both_medians_the_change_and_the_spread() -> None:
    result = gate_result(runs(3494, 3400, 3540), runs(3410, 3300, 3440), tolerance=10)
    assert result.said == (
        "bench gate: concurrency 8: output tokens/s 3,410 (new, median of 3) against 3,494 "
        "(old, median of 3), -2.4 %, spread 4.1 %, tolerance 10 %: pass",
    )


@pytest.mark.parametrize(
    ("old", "new", "tolerance", "status"),
    [
        ((100, 100, 100), (85, 85, 85), 10, "failed"),  # -15 %, no spread: the tolerance decides
        ((100, 100, 100), (92, 92, 92), 10, "passed"),  # -8 %: within the tolerance
        ((100, 99, 101), (80, 78, 82), 10, "failed"),  # -20 %, spreads 2 and 5 %
        ((100, 99, 101), (80, 60, 100), 10, "passed"),  # -20 %, the new side's spread 50 %
        ((100, 60, 101), (80, 78, 82), 10, "passed"),  # -20 %, the old side's spread 41 %
        ((100, 100, 100), (120, 60, 130), 10, "passed"),  # faster: never fails
    ],
)
def test_it_fails_only_beyond_both_the_tolerance_and_the_spread(old, new, tolerance, status):
    assert gate_result(runs(*old), runs(*new), tolerance).status == status


def test_the_spread_is_the_range_against_the_median_of_the_noisier_side() -> None:
    assert spread([100, 90, 110]) == pytest.approx(20.0)
    assert spread([5.0]) == 0.0  # one run: no spread known, the tolerance alone decides
    level = results.gate_levels(runs(100, 90, 110), runs(100, 99, 101), 10)[0]
    assert level.spread == pytest.approx(20.0) and level.runs == (3, 3)


@pytest.mark.parametrize(
    ("old", "new", "status"),
    [
        ((100, 100, 100), (0, 0, 5), "failed"),  # most new runs completed nothing
        ((100, 100, 100), (0, 0, 0), "failed"),
        ((0, 0, 0), (0, 0, 0), "failed"),  # neither build measured anything
        ((0, 0, 5), (100, 100, 100), "passed"),  # the old build measured nothing, the new did
    ],
)
def test_a_side_with_median_0_is_judged_by_its_median_not_passed_by_its_spread(
    old, new, status
) -> None:
    assert gate_result(runs(*old), runs(*new), 10).status == status
    assert spread([0, 0, 5]) == 0.0


def test_failed_requests_fail_the_gate_only_when_every_new_run_fails_more() -> None:
    old = runs(100, 100, 100)
    worse = gate_result(old, runs(100, 100, 100, failed=2), 10)
    assert worse.status == "failed" and worse.reason.endswith(
        ", failed requests 2 (new, fewest in a run) against 0 (old, most in a run): fail"
    )
    one_bad_run = runs(100, 100, failed=0) + runs(100, failed=3)
    assert gate_result(old, one_bad_run, 10).status == "passed"


def test_every_level_is_judged_and_a_level_missing_on_one_side_is_not() -> None:
    old = [{**a, "levels": {**a["levels"], **b["levels"]}}
           for a, b in zip(runs(50, 50, level="1"), runs(400, 400), strict=True)]  # fmt: skip
    new = [{**a, "levels": {**a["levels"], **b["levels"]}}
           for a, b in zip(runs(49, 50, level="1"), runs(100, 100), strict=True)]  # fmt: skip
    result = gate_result(old, new, 10)
    assert [line.split(":")[1].strip() for line in result.said] == ["concurrency 1",
                                                                      "concurrency 8"]  # fmt: skip
    assert result.status == "failed" and result.reason.startswith("concurrency 8: ")
    assert gate_result(runs(1, level="4"), runs(1), 10).status == "baseline"


# ---- bench.gate_runs


@pytest.mark.parametrize("value", ["1", "11", "true", "'3'", "2.5"])
def test_a_bad_gate_runs_is_one_line_naming_it(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as error:
        project.load(write(tmp_path, SERVING + f"bench: {{gate_runs: {value}}}\n"))
    assert any("bench.gate_runs: " in p for p in error.value.problems), error.value


def test_gate_runs_is_not_in_the_key(tmp_path: Path) -> None:
    """How many runs the gate takes does not change a run's numbers: one config_id."""
    three = project.load(write(tmp_path, SERVING))
    five = project.load(write(tmp_path, SERVING + "bench: {gate_runs: 5}\n"))
    assert (three.bench.gate_runs, five.bench.gate_runs) == (3, 5)
    assert store.workload(three) == store.workload(five)


# ---- the gate's sides, without a cluster


def kept(monkeypatch, measured: list[list[dict]]) -> list[tuple[str, ...]]:
    """bench.measure answering `measured` in turn; the run ids it was asked for."""
    asked: list[tuple[str, ...]] = []

    def measure(cluster, folder, run_ids):
        asked.append(run_ids)
        return [(line, None) for line in measured[len(asked) - 1]]

    monkeypatch.setattr(run, "measure", measure)
    return asked


def test_each_side_is_gate_runs_runs_with_their_own_ids(tmp_path: Path, monkeypatch) -> None:
    config = write(tmp_path, SERVING + "bench: {gate_runs: 2}\n")
    asked = kept(monkeypatch, [runs(3494, 3420, digest=OLD), runs(349, 341)])
    left = gate.runs(config, "old", folder=tmp_path)
    assert left == Side("measured", lines=tuple(runs(3494, 3420, digest=OLD)))
    result = gate.gate(config, left, OLD, folder=tmp_path)
    assert result.status == "failed" and "-90.0 %" in result.reason
    assert asked == [(f"{locks.RUN}-old1", f"{locks.RUN}-old2"),
                     (f"{locks.RUN}-new1", f"{locks.RUN}-new2")]  # fmt: skip


def test_a_gate_again_after_an_interruption_compares_with_the_kept_runs_of_the_build_left(
    tmp_path: Path, monkeypatch
) -> None:
    config = write(tmp_path, SERVING)
    index = [*runs(100, digest=OLD), *runs(3494, 3420, 3560, digest=OLD), *runs(50, digest=NEW)]
    (tmp_path / "index.jsonl").write_text("".join(json.dumps(x) + "\n" for x in index))
    kept(monkeypatch, [runs(2836, 2410, 3450)])
    result = gate.gate(config, None, OLD, folder=tmp_path)
    assert result.status == "passed" and "against 3,494 (old, median of 3)" in result.said[0]
    kept(monkeypatch, [runs(2836, 2410, 3450)])
    result = gate.gate(config, None, "sha256:" + "d" * 64, folder=tmp_path)
    assert result == GateResult("baseline", "baseline (no run of config c0nf1g on the build left)")


def test_the_gate_is_skipped_when_bench_gate_is_false(tmp_path: Path, monkeypatch) -> None:
    config = write(tmp_path, SERVING + "bench: {gate: false}\n")
    asked = kept(monkeypatch, [])
    left = gate.runs(config, "old", folder=tmp_path)
    assert left == Side("skipped", "bench.gate: false")
    assert gate.gate(config, left, OLD, folder=tmp_path) == GateResult(
        "skipped", "bench.gate: false"
    )
    assert asked == []


@pytest.mark.parametrize(
    ("ssh", "reason"),
    [
        (None, "No such file or directory: 'ssh'"),
        (SILENT, "cannot be reached: timed out (no answer within 0.2 s)"),
    ],
)
def test_the_gate_never_raises_a_run_that_could_not_start_fails_it(
    tmp_path, monkeypatch, ssh, reason
) -> None:
    fake_ssh(tmp_path, monkeypatch, ssh)
    monkeypatch.setattr(transport, "READ_SECONDS", 0.2)
    config = write(tmp_path, SERVING)
    left = gate.runs(config, "old", folder=tmp_path)
    assert left.status == "failed" and reason in left.reason, left
    measured = Side("measured", lines=tuple(runs(100, digest=OLD)))
    result = gate.gate(config, measured, OLD, folder=tmp_path)
    assert result.status == "failed" and reason in result.reason, result
