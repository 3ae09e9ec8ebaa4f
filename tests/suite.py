"""`make test`: the unit and plan tests beside the lab's e2e tests, one JUnit report.

The e2e tests spend most of their time waiting on the lab (reboots, restarts, the membership
minute), which leaves a core idle; the unit and plan tests (about a minute of one core) run in
it instead of before the e2e tests start. Their output is kept and printed after the e2e
tests', so that neither interleaves with the other.

    python -m tests.suite [REPORT]   (REPORT: reports/junit.xml)
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BESIDE = ("tests/unit", "tests/plan")
LAB = ("tests/e2e",)


def pytest(paths: tuple[str, ...], junit: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", *paths, f"--junitxml={junit}"]


def merge(parts: dict[str, Path], report: Path) -> None:
    """One `<testsuites>` of every part's suites, the form pytest writes itself, each suite
    named after the paths it ran."""
    merged = ET.Element("testsuites")
    for name, part in parts.items():
        if part.exists():
            for suite in ET.parse(part).getroot().iter("testsuite"):
                suite.set("name", name)
                merged.append(suite)
            part.unlink()
    ET.ElementTree(merged).write(report, encoding="utf-8", xml_declaration=True)


def main(argv: list[str]) -> int:
    report = ROOT / (argv[0] if argv else "reports/junit.xml")
    report.parent.mkdir(parents=True, exist_ok=True)
    beside_junit, lab_junit = (report.with_suffix(f".{name}.xml") for name in ("beside", "lab"))
    log = report.with_suffix(".beside.log")
    with log.open("w") as out:
        beside = subprocess.Popen(
            pytest(BESIDE, beside_junit), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
        )
        lab = subprocess.run(pytest(LAB, lab_junit), cwd=ROOT).returncode
        beside_code = beside.wait()
    print(f"\n{' '.join(BESIDE)}, run beside {' '.join(LAB)} ({log}):")
    print(log.read_text(), end="", flush=True)
    merge({" ".join(BESIDE): beside_junit, " ".join(LAB): lab_junit}, report)
    return beside_code or lab


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
