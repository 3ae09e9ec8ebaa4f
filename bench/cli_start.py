"""How fast `halo-cluster` answers before it does anything: a script that prints numbers, not a
test. No lab, no root.

    .venv/bin/python bench/cli_start.py [--repeat 20]

For `halo-cluster --help`, `halo-cluster deploy --help` and `halo-cluster --version`: the wall
time (median and worst of --repeat runs), beside the interpreter's own start (`python -c pass`),
and the modules `--help` imports that the interpreter alone does not (pyinfra, pytest or the
config loader among them would be a regression: docs/architecture.md, Tools). The budget for
`--help` is 0.2 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
HALO_CLUSTER = str(BIN / "halo-cluster")
RUNS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "halo-cluster --help": [HALO_CLUSTER, "--help"],
    "halo-cluster deploy --help": [HALO_CLUSTER, "deploy", "--help"],
    "halo-cluster --version": [HALO_CLUSTER, "--version"],
}
BUDGET = 0.2  # seconds, for `halo-cluster --help`
HEAVY = ("pyinfra", "pytest", "yaml", "jinja2", "halo_cluster.config.loader")


def seconds(argv: list[str]) -> tuple[float, float]:
    """ARGV's wall time and its CPU time (user and system: less of a shared machine's load)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def imported() -> list[str]:
    """The modules `halo-cluster --help` imports beyond the interpreter's start."""
    code = (
        "import sys, contextlib, io\n"
        "before = set(sys.modules)\n"
        "from halo_cluster.tools import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        cli.main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('\\n'.join(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.split()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    repeat = parser.parse_args().repeat
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    medians = {}
    for name, argv in RUNS.items():
        wall, cpu = zip(*(seconds(argv) for _ in range(repeat)), strict=True)
        medians[name] = statistics.median(wall)
        print(
            f"{name:28} wall median {medians[name]:.3f} s, worst {max(wall):.3f} s; "
            f"CPU median {statistics.median(cpu):.3f} s"
        )
    modules = imported()
    heavy = [m for m in modules if m.startswith(HEAVY)]
    print(
        f"--help imports {len(modules)} modules beyond the interpreter's; heavy: {heavy or 'none'}"
    )
    help_time = medians["halo-cluster --help"]
    verdict = "within" if help_time <= BUDGET else "OVER"
    print(f"budget for --help: {BUDGET} s: {verdict} ({help_time:.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
