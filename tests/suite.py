"""`make test`: the unit and plan tests beside the lab's e2e tests, one JUnit report.

The e2e tests spend most of their time waiting on the lab (reboots, restarts, the membership
minute), which leaves a core idle; the unit and plan tests (about a minute of one core) run in
it instead of before the e2e tests start. Their output is kept and printed after the e2e
tests', so that neither interleaves with the other.

    python -m tests.suite [REPORT]   (REPORT: reports/junit.xml)
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BESIDE = ("tests/unit", "tests/plan")
LAB = ("tests/e2e",)
# pytest's exit codes, the worst first: internal error, interrupted, usage error, tests failed,
# no tests collected, passed; any other (a signal's 128 + N) is worse than all of them
SEVERITY = (3, 2, 4, 1, 5, 0)


def pytest(paths: tuple[str, ...], junit: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "pytest", *paths, f"--junitxml={junit}", *options]


def finish(runs: list[subprocess.Popen]) -> list[int]:
    """Each run's exit code. An interrupt of this process (Ctrl-C, SIGTERM) reaches each run
    once, which then ends as pytest does: the e2e run's teardown takes the lab down. (The runs
    have their own process groups, so that a terminal's Ctrl-C does not reach them twice.)"""
    while True:
        try:
            return [run.wait() for run in runs]
        except KeyboardInterrupt:
            for run in runs:
                if run.poll() is None:
                    run.send_signal(signal.SIGINT)


def worst(codes: list[int]) -> int:
    shell = [128 - code if code < 0 else code for code in codes]
    return min(shell, key=lambda code: SEVERITY.index(code) if code in SEVERITY else -1)


def suites(name: str, part: Path, code: int) -> list[ET.Element]:
    """The part's suites, named after the paths it ran; one error in their place if its pytest
    ended without a readable report."""
    try:
        found = list(ET.parse(part).getroot().iter("testsuite"))
    except (OSError, ET.ParseError):
        found = [ET.Element("testsuite", name=name, tests="1", errors="1", failures="0")]
        case = ET.SubElement(found[0], "testcase", classname=name, name="pytest")
        ET.SubElement(case, "error", message=f"pytest exited {code} without a report")
    for suite in found:
        suite.set("name", name)
    return found


def merge(parts: dict[str, tuple[Path, int]], report: Path) -> None:
    """One `<testsuites>` of every part's suites, the form pytest writes itself."""
    merged = ET.Element("testsuites", name="pytest tests")
    for name, (part, code) in parts.items():
        merged.extend(suites(name, part, code))
        part.unlink(missing_ok=True)
    ET.ElementTree(merged).write(report, encoding="utf-8", xml_declaration=True)


def slowest(report: Path, count: int = 10) -> list[str]:
    """The `count` slowest tests of the merged report, one line each: seconds and the test."""
    cases = ET.parse(report).getroot().iter("testcase")
    timed = sorted(((float(c.get("time", 0)), c) for c in cases), key=lambda t: -t[0])
    return [
        f"{seconds:8.1f} s  {case.get('classname', '')}::{case.get('name', '')}"
        for seconds, case in timed[:count]
    ]


def main(argv: list[str]) -> int:
    started = time.monotonic()
    report = ROOT / (argv[0] if argv else "reports/junit.xml")
    report.parent.mkdir(parents=True, exist_ok=True)
    beside_junit, lab_junit = (report.with_suffix(f".{name}.xml") for name in ("beside", "lab"))
    for stale in (report, beside_junit, lab_junit):  # an interrupted run's parts are not merged
        stale.unlink(missing_ok=True)
    log = report.with_suffix(".beside.log")
    with log.open("w", encoding="utf-8") as out:
        # its own cache folder: the e2e run, ending last, would overwrite its last failures
        beside = pytest(BESIDE, beside_junit, "-o", "cache_dir=.pytest_cache/beside")
        runs = [
            subprocess.Popen(
                beside, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, process_group=0
            ),
            subprocess.Popen(pytest(LAB, lab_junit), cwd=ROOT, process_group=0),
        ]
        codes = finish(runs)
    print(f"\n{' '.join(BESIDE)}, run beside {' '.join(LAB)} ({log}):")
    print(log.read_text(encoding="utf-8", errors="replace"), end="", flush=True)
    beside_code, lab_code = codes
    parts = {" ".join(BESIDE): (beside_junit, beside_code), " ".join(LAB): (lab_junit, lab_code)}
    merge(parts, report)
    wall = time.monotonic() - started
    print(f"\nthe suite took {wall // 60:.0f} min {wall % 60:.0f} s; its slowest tests:")
    print("\n".join(slowest(report)), flush=True)
    return worst(codes)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main(sys.argv[1:]))
