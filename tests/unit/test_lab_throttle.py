"""`python -m lab throttle` (lab/throttle.py): the rate as written, the hub's bodies paced by the
stored rate, and the registry's port shaped on each node's loopback, nothing else."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest

from lab import throttle
from lab.hubserver import Hub, Repo
from lab.sh import LabError


@pytest.mark.parametrize(
    ("text", "rate"),
    [("2MB/s", 2_000_000), ("500KB/s", 500_000), ("1.5mb/s", 1_500_000), ("off", None)],
)
def test_the_rate_as_written(text: str, rate: int | None) -> None:
    assert throttle.parse_rate(text) == rate


@pytest.mark.parametrize("text", ["2MB", "fast", "0MB/s", "-1MB/s", "2 Mbit/s"])
def test_a_rate_that_is_none_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(LabError, match=r"throttle --rate .*2MB/s or 500KB/s, or off"):
        throttle.parse_rate(text)


def fetch_seconds(hub: Hub) -> float:
    start = time.monotonic()
    with urllib.request.urlopen(f"{hub.url}/org/model/resolve/main/model.safetensors") as answer:
        assert len(answer.read()) == 400_000
    return time.monotonic() - start


def test_the_hub_sends_at_the_stored_rate(tmp_path: Path) -> None:
    repos = {"org/model": Repo("0" * 40, {"model.safetensors": bytes(400_000)})}
    rate_file = tmp_path / throttle.RATE_FILE
    hub = Hub(("127.0.0.1", 0), repos, rate_file=rate_file).start()
    try:
        assert fetch_seconds(hub) < 0.3
        throttle.throttle(tmp_path, [], 1_000_000)  # no lab nodes: the hub's rate alone
        assert 0.3 < fetch_seconds(hub) < 1.5
        throttle.throttle(tmp_path, [], None)
        assert not rate_file.exists() and fetch_seconds(hub) < 0.3
    finally:
        hub.stop()


def test_each_nodes_registry_port_is_shaped(monkeypatch, tmp_path: Path) -> None:
    ran: list[tuple[str, ...]] = []
    monkeypatch.setattr(throttle.sh, "run", lambda *argv, check=True: ran.append(argv))
    throttle.throttle(tmp_path, ["node1", "node2"], 2_000_000)
    assert (tmp_path / throttle.RATE_FILE).read_text() == "2000000\n"
    node2 = [argv for argv in ran if argv[:3] == ("tc", "-n", "halolab-node2")]
    assert [argv[3:5] for argv in node2] == [
        ("qdisc", "del"),
        ("qdisc", "add"),
        ("class", "add"),
        ("filter", "add"),
    ]
    assert "16000000bit" in node2[2] and node2[3][-5:-2] == ("sport", "5000", "0xffff")
    ran.clear()
    throttle.throttle(tmp_path, ["node1", "node2"], None)
    assert [argv[3:5] for argv in ran] == [("qdisc", "del")] * 2
