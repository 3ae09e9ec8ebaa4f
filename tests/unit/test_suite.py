"""`make test`'s runner (tests/suite.py): the two runs at once, both in one JUnit report, the
worse exit code of the two, the unit and plan output after the e2e output."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests import suite

# each run's test waits for the other's to start: two runs one after the other fail it
MEETS = """
import time
from pathlib import Path

def test_{name}():
    print("output of {name}")
    Path("{folder}", "{name}.started").touch()
    deadline = time.monotonic() + 20
    while not Path("{folder}", "{other}.started").exists():
        assert time.monotonic() < deadline, "the other run did not start beside this one"
        time.sleep(0.05)
    assert {passes}
"""


def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **bodies: str) -> Path:
    """Each run one test file of `bodies` (beside, lab); the report's path."""
    for name, body in bodies.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / f"test_{name}.py").write_text(body)
        monkeypatch.setattr(suite, name.upper(), (str(tmp_path / name),))
    return tmp_path / "reports" / "junit.xml"


def meets(tmp_path: Path, name: str, passes: bool) -> str:
    other = "lab" if name == "beside" else "beside"
    return MEETS.format(name=name, other=other, folder=tmp_path, passes=passes)


@pytest.mark.parametrize("failing", [(), ("beside",), ("lab",), ("beside", "lab")])
def test_both_run_at_once_into_one_report_and_either_failure_fails(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture,
    failing: tuple[str, ...],
) -> None:
    names = ("beside", "lab")
    bodies = {name: meets(tmp_path, name, name not in failing) for name in names}
    report = runs(tmp_path, monkeypatch, **bodies)
    assert suite.main([str(report)]) == (1 if failing else 0)
    root = ET.parse(report).getroot()
    found = root.findall("testsuite")
    assert [s.get("name") for s in found] == [suite.BESIDE[0], suite.LAB[0]]
    assert [s.get("failures") for s in found] == [str(int(n in failing)) for n in names]
    assert [c.get("name") for c in root.iter("testcase")] == ["test_beside", "test_lab"]
    assert sorted(p.name for p in report.parent.iterdir()) == ["junit.beside.log", "junit.xml"]
    out = capfd.readouterr().out
    heading = out.index(f"{suite.BESIDE[0]}, run beside {suite.LAB[0]}")
    assert out.index("test_lab.py") < heading < out.index("test_beside.py"), out
    assert "\nthe suite took 0 min " in out[heading:]
    assert out.rstrip().endswith("::test_lab") or out.rstrip().endswith("::test_beside"), out


def test_the_slowest_tests_are_listed_slowest_first(tmp_path: Path) -> None:
    cases = "".join(
        f'<testcase classname="tests.e2e.test_m" name="test_{n}" time="{t}"/>'
        for n, t in (("a", "1.5"), ("b", "30.25"), ("c", "0.01"), ("d", "7"))
    )
    report = tmp_path / "junit.xml"
    report.write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
    assert suite.slowest(report, 3) == [
        "    30.2 s  tests.e2e.test_m::test_b",
        "     7.0 s  tests.e2e.test_m::test_d",
        "     1.5 s  tests.e2e.test_m::test_a",
    ]


def test_a_run_without_a_report_is_an_error_in_it_and_the_worse_code_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The e2e run dies before writing its report (exit 3, as pytest's internal error): the
    report says so in its place, and a failed unit test (exit 1) does not hide it."""
    died = "import os\n\ndef test_x():\n    os._exit(3)\n"
    report = runs(tmp_path, monkeypatch, beside="def test_x():\n    assert False\n", lab=died)
    assert suite.main([str(report)]) == 3
    lab = ET.parse(report).getroot().findall("testsuite")[1]
    assert lab.get("errors") == "1"
    error = lab.find("testcase/error")
    assert error is not None and error.get("message") == "pytest exited 3 without a report"


@pytest.mark.parametrize(
    ("codes", "expected"),
    [([0, 0], 0), ([1, 0], 1), ([1, 2], 2), ([5, 1], 1), ([3, 1], 3), ([0, -9], 137)],
)
def test_the_worse_exit_code_is_the_suites(codes: list[int], expected: int) -> None:
    assert suite.worst(codes) == expected
