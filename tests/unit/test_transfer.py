"""A long transfer's progress (issue 35, item 5): the line an operator reads (bytes of the total,
rate, time left), the stall said once, what the pull and the download count, and the ticker that
reads a node while the transfer runs."""

from __future__ import annotations

import threading

import pytest

from halo_cluster.decide.transfer import (
    Expected,
    Meter,
    duration,
    layers_to_fetch,
    line,
    on_disk,
    rate,
    size,
)
from halo_cluster.node.progress import Measure, measuring, pull_measure
from halo_cluster.roles.serve.download import repository_files

GiB, MiB = 2**30, 2**20


@pytest.mark.parametrize(
    ("count", "shown"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1536, "1.5 KiB"),
        (int(12.4 * GiB), "12.4 GiB"),
        (int(20.1 * GiB), "20.1 GiB"),
        (150 * MiB, "150 MiB"),
        (3 * 2**40, "3.0 TiB"),
    ],
)
def test_size_in_binary_units(count: int, shown: str) -> None:
    assert size(count) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "0 s"), (41.4, "41 s"), (161, "2 min 41 s"), (3600 * 3 + 7 * 60 + 5, "3 h 7 min")],
)
def test_duration_as_a_person_reads_it(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


def test_the_line_of_the_issue() -> None:
    done, total, per_second = int(12.4 * GiB), int(20.1 * GiB), 48 * MiB
    assert line(done, total, per_second) == "12.4 GiB of 20.1 GiB, 48 MiB/s, 2 min 44 s left"


def test_a_line_without_a_rate_a_total_or_bytes_flowing() -> None:
    assert line(5 * MiB, 20 * MiB, None) == "5.0 MiB of 20.0 MiB"
    assert line(5 * MiB, None, 2 * MiB) == "5.0 MiB so far, 2.0 MiB/s"
    assert line(5 * MiB, 20 * MiB, 0.0) == "5.0 MiB of 20.0 MiB, 0 B/s"
    # all there (a pull then unpacks its layer): no time left to guess, never past the total
    assert line(21 * MiB, 20 * MiB, 1.0) == "20.0 MiB of 20.0 MiB, finishing"


def test_rate_over_the_last_window() -> None:
    assert rate([(0.0, 0)]) is None
    assert rate([(0.0, 0), (15.0, 30 * MiB)]) == 2 * MiB
    # the first minute's burst is forgotten once it is more than a window old
    samples = [(0.0, 0), (15.0, 300 * MiB), (75.0, 360 * MiB), (90.0, 375 * MiB)]
    assert rate(samples, window=60) == pytest.approx(1 * MiB)


def test_meter_counts_a_pull_since_it_began_and_says_a_stall_once() -> None:
    meter = Meter(Expected(40 * MiB), stall=30)
    listing = "1 {}\n2 {}\n"  # podman's staging files, numbered
    meter.observe(0, listing.format(5 * MiB, 0))  # an earlier pull's leftover: not this one's
    first, stalled = meter.observe(15, listing.format(5 * MiB, 30 * MiB))
    assert first == "30.0 MiB of 40.0 MiB, 2.0 MiB/s, 5 s left" and stalled is None
    said = [meter.observe(t, listing.format(5 * MiB, 30 * MiB))[1] for t in (30, 45, 60)]
    assert said == [None, "no progress for 30 s (30.0 MiB of 40.0 MiB)", None]
    assert meter.observe(75, listing.format(5 * MiB, 31 * MiB))[1] is None
    assert meter.observe(105, listing.format(5 * MiB, 31 * MiB))[1] is not None  # a new stall


def test_meter_never_calls_a_finished_transfer_stalled() -> None:
    meter = Meter(Expected(10, frozenset({"a"})), stall=10)
    for at in range(0, 60, 15):
        assert meter.observe(at, "a 10\n") == ("10 B of 10 B, finishing", None)


def test_a_download_counts_its_own_blobs_partial_ones_included() -> None:
    lfs, config = "f" * 64, "c" * 40
    names = frozenset({lfs, config})
    listing = f"{config} 700\n{lfs}.1a2b3c4d.incomplete 5000\n{'e' * 64} 999999\n"
    assert on_disk(listing, names) == 5700  # another revision's blob is not this download's
    assert on_disk(listing, None) == 5700 + 999999


def test_the_repository_listing_from_the_image() -> None:
    lfs, config = "f" * 64, "c" * 40
    output = f"some warning\n{config} 700\n{lfs} 16777216\n"
    assert repository_files(output) == Expected(16777916, frozenset({lfs, config}))
    assert repository_files("OfflineModeIsEnabled\n") == Expected(None)


def test_the_layers_a_pull_lacks() -> None:
    inspected = "sha256:aaa 100 sha256:bbb 2000 sha256:ccc 30000 "
    stored = '[{"compressed-diff-digest":"sha256:aaa"},{"compressed-diff-digest":"sha256:ccc"}]'
    assert layers_to_fetch(inspected, stored) == Expected(2000)
    assert layers_to_fetch("", stored) == Expected(None)  # the registry did not answer


def test_the_pull_measure_reads_the_registry_and_the_staging_files() -> None:
    measure = pull_measure("vllm", "docker.io/kyuz0/vllm@sha256:" + "1" * 64)
    assert "skopeo inspect" in measure.expected and "LayersData" in measure.expected
    assert " docker://docker.io/kyuz0/vllm@sha256:" in measure.expected
    assert (
        "/var/tmp/container_images_storage*" in measure.on_disk and "-user vllm" in measure.on_disk
    )
    output = '[{"id":"x","compressed-diff-digest":"sha256:aaa"}]\n--- in the registry\n'
    assert measure.expected_from(output + "sha256:aaa 10 sha256:bbb 20 ") == Expected(20)


def test_measuring_says_lines_while_the_transfer_runs() -> None:
    """The ticker reads the node as the transfer runs (here faster than every 15 s, on a clock
    of its own), says each line, and nothing once the transfer is over."""
    sizes = iter([0, 10 * MiB, 20 * MiB, 20 * MiB])
    ticks = iter([0.0, 15.0, 30.0, 45.0])
    said: list[tuple[str, bool]] = []
    three = threading.Event()

    def run(script: str) -> str:
        if script == "total":
            return "40"
        return f"1 {next(sizes, 20 * MiB)}\n"

    def say(text: str, warning: bool) -> None:
        said.append((text, warning))
        if len(said) == 3:
            three.set()

    measure = Measure("total", lambda out: Expected(40 * MiB), "sizes")
    clock = lambda: next(ticks, 60.0)  # noqa: E731
    with measuring(say, run, "podman pull X", measure, every=0.01, clock=clock):
        assert three.wait(5)
    count = len(said)
    threading.Event().wait(0.05)
    assert said[:2] == [
        ("podman pull X: 10.0 MiB of 40.0 MiB, 683 KiB/s, 45 s left", False),
        ("podman pull X: 20.0 MiB of 40.0 MiB, 683 KiB/s, 30 s left", False),
    ]
    assert len(said) == count  # the ticker stopped with the block


def test_measuring_never_fails_the_transfer() -> None:
    def run(script: str) -> str:
        raise TimeoutError("no answer")

    said: list[tuple[str, bool]] = []
    measure = Measure("total", lambda out: Expected(None), "sizes")
    with measuring(lambda t, w: said.append((t, w)), run, "x", measure, every=0.01):
        threading.Event().wait(0.05)
    assert said == []
