"""`make test`'s runner (tests/suite.py): both runs reported in one JUnit file, either's failure
fails it."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests import suite


def write(folder: Path, name: str, body: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f"def test_it():\n    {body}\n")
    return str(folder / name)


@pytest.mark.parametrize("failing", ["beside", "lab", None])
def test_one_report_of_both_and_either_failure_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str | None
) -> None:
    for name in ("beside", "lab"):
        body = "assert False" if name == failing else "assert True"
        path = write(tmp_path / name, f"test_{name}.py", body)
        monkeypatch.setattr(suite, name.upper(), (path,))
    report = tmp_path / "reports" / "junit.xml"
    code = suite.main([str(report)])
    assert (code != 0) == (failing is not None), code
    suites = ET.parse(report).getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == [suite.BESIDE[0], suite.LAB[0]]
    assert [s.get("failures") for s in suites] == [
        str(int(name == failing)) for name in ("beside", "lab")
    ]
    assert sorted(p.name for p in report.parent.iterdir()) == ["junit.beside.log", "junit.xml"]
