"""Where the e2e tests' time goes, by kind of call: a pytest plugin that records every command a
test runs (deploys, `halo-cluster`, `python -m lab`, ssh) and every sleep, and a report of them.
It prints numbers, it asserts nothing (docs/performance.md, `make test`).

    .venv/bin/python -m pytest tests/e2e -p bench.e2e_time
    .venv/bin/python -m bench.e2e_time [reports/e2e-time.jsonl] [--tests 25]

The first records reports/e2e-time.jsonl (HALO_E2E_TIME names another file); the second prints
the seconds and counts per kind of call, the lab states' restores and saves, then the slowest
tests with their largest kinds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECORD = Path(os.environ.get("HALO_E2E_TIME", ROOT / "reports" / "e2e-time.jsonl"))
_now: dict[str, str] = {"test": "-", "phase": "-"}
_run, _sleep = subprocess.run, time.sleep


def _write(kind: str, what: str, seconds: float) -> None:
    line = {**_now, "kind": kind, "what": what, "seconds": round(seconds, 3)}
    with RECORD.open("a") as out:
        out.write(json.dumps(line) + "\n")


def _kind(argv: Any) -> str:
    """A call's kind: `pyinfra deploy`, `halo-cluster upgrade`, `lab reboot`, `ssh`..."""
    words = argv.split() if isinstance(argv, str) else [str(a) for a in argv]
    name = Path(words[0]).name if words else "?"
    if name == "pyinfra":
        return "pyinfra --dry" if "--dry" in words else "pyinfra deploy"
    if name == "halo-cluster" and len(words) > 1:
        return f"halo-cluster {words[1]}"
    if name.startswith("python") and words[1:3] == ["-m", "lab"] and len(words) > 3:
        return f"lab {words[3]}"
    return name


def _timed_run(*args: Any, **kwargs: Any) -> Any:
    argv = args[0] if args else kwargs.get("args", "?")
    started = time.monotonic()
    try:
        return _run(*args, **kwargs)
    finally:
        what = argv if isinstance(argv, str) else " ".join(map(str, argv))
        _write(_kind(argv), what[-200:], _elapsed(started))


def _timed_sleep(seconds: float) -> None:
    started = time.monotonic()
    _sleep(seconds)
    _write("sleep", str(seconds), _elapsed(started))


def _elapsed(started: float) -> float:
    return time.monotonic() - started


def pytest_configure(config: pytest.Config) -> None:
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text("")
    # the tests, lab/faults.py and lab/cli.py look these up at each call
    subprocess.run, time.sleep = _timed_run, _timed_sleep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    _now["test"] = item.nodeid
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    _now["phase"] = "setup"
    yield
    _now["phase"] = "call"


def report(path: Path, tests: int) -> None:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line]
    seconds: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    per_test: dict[str, Counter[str]] = defaultdict(Counter)
    for line in lines:
        seconds[line["kind"]] += line["seconds"]
        counts[line["kind"]] += 1
        per_test[line["test"].rsplit("::", 1)[-1]][line["kind"]] += line["seconds"]
    print(f"{'seconds':>8} {'calls':>6}  kind")
    for kind, total in seconds.most_common():
        print(f"{total:8.1f} {counts[kind]:6d}  {kind}")
    by_state(lines)
    print(f"\n{'seconds':>8}  test: its largest kinds")
    slowest = sorted(per_test.items(), key=lambda item: -sum(item[1].values()))[:tests]
    for test, kinds in slowest:
        largest = ", ".join(f"{kind} {total:.0f}" for kind, total in kinds.most_common(4))
        print(f"{sum(kinds.values()):8.1f}  {test}: {largest}")


def by_state(lines: list[dict]) -> None:
    """Per lab state (tests/e2e/states.py): its restores, each a deploy the suite did not run
    to reach it, and its saves, each a state deployed and saved (a first run, a stale key)."""
    runs: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for line in lines:
        if line["kind"] in ("lab restore", "lab snapshot"):
            runs[line["what"].split()[-1]][line["kind"]].append(line["seconds"])
    if not runs:
        return
    print(f"\n{'restores':>8} {'seconds':>8} {'saves':>6} {'seconds':>8}  state")
    for state, kinds in sorted(runs.items()):
        restores, saves = kinds["lab restore"], kinds["lab snapshot"]
        print(f"{len(restores):8d} {sum(restores):8.1f} {len(saves):6d} {sum(saves):8.1f}  {state}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("record", nargs="?", type=Path, default=RECORD)
    parser.add_argument("--tests", type=int, default=25, help="how many of the slowest tests")
    args = parser.parse_args()
    report(args.record, args.tests)


if __name__ == "__main__":
    main()
