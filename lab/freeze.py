"""`python -m lab freeze NODE --seconds N`: a GPU hang on one node, as the cluster sees it. The
vLLM rank's processes there stop (SIGSTOP) for N seconds, then go on (SIGCONT); everything else
keeps running: Ray's own processes (raylet, GCS, agents), the launcher and the API server.

The rank's processes are found by the names vLLM gives its GPU workers, which the stand-in keeps
(lab/standin/): `VLLM::Worker_TP<rank>` for the native launcher's workers (vllm/utils/
system_utils.py: set_process_title) and `ray::RayWorkerProc...` for Ray's actors of vLLM's
executor (vllm/v1/executor/ray_executor_v2.py; Ray titles an actor's process `ray::CLASS`)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable

from halo_cluster.config.quoting import quote
from lab.sh import LabError

# the process titles of a vLLM rank's GPU workers, with either launcher
RANK_PROCESSES = "^(VLLM::Worker|ray::RayWorkerProc)"
SSH_SECONDS = 30


def check(nodes: list[str], name: str, seconds: float) -> None:
    """The node is one of the lab's, the time a positive number of seconds."""
    if name not in nodes:
        raise LabError(f"freeze: no lab node named {quote(name)} (nodes: {', '.join(nodes)})")
    if not seconds > 0:
        raise LabError(f"freeze --seconds {quote(seconds)}: the seconds must be more than 0")


def on_node(ssh: list[str], command: str) -> str:
    done = subprocess.run([*ssh, command], capture_output=True, text=True, timeout=SSH_SECONDS)
    return done.stdout


class Ended(Exception):
    """SIGTERM or SIGINT reached the freeze: it resumes the rank, then ends."""


def end(signum: int, _frame: object) -> None:
    raise Ended(signal.Signals(signum).name)


def end_on_signals() -> None:
    """Either signal ends the freeze early, its rank resumed. Set here, not left to Python's
    default: a process started in the background of a non-interactive shell (CI's, nohup's)
    inherits SIGINT ignored, and Python then installs no KeyboardInterrupt for it, so an
    interrupt would be lost and the rank stay frozen for the whole time."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, end)


def freeze(nodes: list[str], name: str, seconds: float, ssh: Callable[[], list[str]]) -> None:
    """Stop the rank's processes on `name` for `seconds`, then resume them; `ssh` gives the
    command line that runs a command there as root (called once the node is known)."""
    check(nodes, name, seconds)
    argv = ssh()
    pids = on_node(argv, f"pgrep -f '{RANK_PROCESSES}' || true").split()
    if not pids:
        raise LabError(
            f"freeze: no vLLM rank process runs on {name} (VLLM::Worker or ray::RayWorkerProc)"
        )
    listed = " ".join(pids)
    ended = ""
    end_on_signals()
    try:  # from before the SIGSTOP: a signal at any moment after it still resumes the rank
        on_node(argv, f"kill -STOP {listed}")
        print(f"lab: {name}: vLLM rank frozen (SIGSTOP to {listed}) for {seconds:g} s", flush=True)
        time.sleep(seconds)
    except Ended as signum:
        ended = f", ended early by {signum}"
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):  # a second one must not skip the SIGCONT
            signal.signal(signum, signal.SIG_IGN)
        on_node(argv, f"kill -CONT {listed}")
    print(f"lab: {name}: vLLM rank resumed (SIGCONT to {listed}){ended}", flush=True)
