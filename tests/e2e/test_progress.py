"""A long transfer says its progress, in the lab (issue 35, item 5): with the lab's registry
throttled (`python -m lab throttle --rate 2MB/s`), a deploy that pulls the image again on a node
says there, at least every 15 s, the bytes fetched of the total, the rate and the time left;
then the throttle ends, and the same deploy converges the node."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import threading
import time

from halo_cluster.config.loader import load_cluster
from halo_cluster.node.facts import as_user
from lab import cli
from tests.e2e.conftest import PYINFRA, ROOT, Lab

PROGRESS = re.compile(
    r"\[node2\] podman pull \S+ as vllm: [\d.]+ [KMG]?i?B of [\d.]+ MiB, "
    r"[\d.]+ [KMG]?i?B/s, (\d+ min )?\d+ s left"
)
LINES_SEEN = 2  # two lines: their gap is the interval
WAIT_SECONDS = 75  # for the two lines: 15 s each, the deploy's own start before them


def test_a_throttled_pull_says_its_bytes_rate_and_time_left(converged: Lab) -> None:
    lab = converged
    image = load_cluster(cli.CONFIG).container.pinned
    # the image and the toolbox made from it gone from node2: the deploy pulls and remakes them
    lab.ssh("node2", as_user("vllm", f"podman rmi --force {image}") + " >/dev/null")
    lab.lab("throttle", "--rate", "2MB/s")
    seen: list[tuple[float, str]] = []
    lines: list[str] = []
    enough = threading.Event()

    def read(stream) -> None:
        for text in stream:
            lines.append(text)
            if PROGRESS.search(text):
                seen.append((time.monotonic(), text.strip()))
                if len(seen) >= LINES_SEEN:
                    enough.set()

    env = dict(os.environ, CLUSTER_CONFIG=str(lab.config("reboot: if-needed\n")))
    deploy = subprocess.Popen(
        [PYINFRA, "-y", "inventory.py", "deploy.py"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    reader = threading.Thread(target=read, args=(deploy.stdout,), daemon=True)
    reader.start()
    try:
        enough.wait(WAIT_SECONDS)
    finally:
        lab.lab("throttle", "--rate", "off")
        code = deploy.wait(timeout=600)
        reader.join(timeout=10)
    output = "".join(lines)
    assert len(seen) >= LINES_SEEN, output[-3000:]
    print("\n".join(line for _, line in seen))
    gaps = [later[0] - earlier[0] for earlier, later in itertools.pairwise(seen)]
    assert all(gap < 20 for gap in gaps), gaps  # every 15 s, and a read's time
    assert code == 0, output[-3000:]
    assert "no progress for" not in output
