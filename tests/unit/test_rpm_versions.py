"""rpm's ASCII version grammar (config/rpmversion.py) where it is the rule: `upgrade --os
--kernel/--firmware`, every version and every other key of an `os.known_versions` entry, and rpm's
comparison, which sees nothing else. Each refusal is one line naming the option or the key, the
value quoted, with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from halo_cluster.config import rpmversion
from halo_cluster.config.loader import load_cluster
from halo_cluster.roles.os import schema, versions
from halo_cluster.tools import project
from halo_cluster.tools.upgrading import kernels, osmain
from halo_cluster.tools.upgrading.machine import REFUSED
from tests.unit.configs import VALID_ROCE, problems, write

ARABIC_ONE = "\u0661"  # ARABIC-INDIC DIGIT ONE: `\d` and str.isdigit() take it, int() reads 1
LONG = "6." + "1" * 4998  # 5,000 characters of what would otherwise be a version


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        (
            "--kernel",
            f"{ARABIC_ONE}:6.18.3-200.fc43",
            "--kernel: '\u0661:6.18.3-200.fc43' (U+0661 ARABIC-INDIC DIGIT ONE at 1) is not an "
            "rpm version: ASCII letters and digits only (give it as rpm prints it, without the "
            "arch: 6.18.9-200.fc43)",
        ),
        (
            "--kernel",
            f"6.18.3-200.fc4{ARABIC_ONE}",
            "(U+0661 ARABIC-INDIC DIGIT ONE at 15) is not an rpm version",
        ),
        ("--kernel", LONG, "(5000 characters) is longer than 128 characters (give it as rpm"),
        (
            "--firmware",
            "20260110-1.fc43.noarch",
            "--firmware: '20260110-1.fc43.noarch' ends in the arch .noarch (give it without the "
            "arch: 20260110-1.fc43)",
        ),
        ("--kernel", "6.18.9-200.fc43.x86_64", "ends in the arch .x86_64"),
        ("--kernel", "6.18.9", "'6.18.9' is not [EPOCH:]VERSION-RELEASE"),
        ("--kernel", "6.18.9-200-fc43", "is not [EPOCH:]VERSION-RELEASE"),
        ("--kernel", "x:6.18.9-200.fc43", "is not [EPOCH:]VERSION-RELEASE"),
        ("--kernel", "6.18.9-200.fc43;reboot", "'6.18.9-200.fc43;reboot' is not [EPOCH:]"),
        ("--kernel", "%{version}-1", "is not [EPOCH:]VERSION-RELEASE"),
        ("--kernel", "6.18.9-200.fc43\nfix: x", "'6.18.9-200.fc43\\nfix: x' is not [EPOCH:]"),
        ("--firmware", "\x1b[2J-1", "'\\x1b[2J-1' is not [EPOCH:]VERSION-RELEASE"),
    ],
)
def test_a_target_outside_the_grammar_is_one_line_exit_1_before_the_config(
    option: str, value: str, said: str, capsys, monkeypatch
) -> None:
    monkeypatch.setattr(project, "load", lambda _: pytest.fail("the config was read"))
    with pytest.raises(SystemExit) as stopped:
        osmain.main(["--os", option, value])
    assert stopped.value.code == REFUSED
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err
    assert err.startswith(f"halo-cluster upgrade --os: {option}: "), err
    assert "\x1b" not in err and len(err) < 400, err


@pytest.mark.parametrize(
    "value", ["6.18.9-200.fc43", "1:6.18.9-200.fc43", "1.0~rc1^git2-0.1.fc43", "2.0_a+b-1"]
)
def test_versions_rpm_prints_are_taken(value: str) -> None:
    assert kernels.target_rule("--kernel")(value) is None


def test_the_length_bound_is_128_characters() -> None:
    assert rpmversion.problem("6." + "1" * 125 + "-1") is not None  # 129
    assert rpmversion.problem("6." + "1" * 124 + "-1") is None  # 128


def test_rpm_s_comparison_sees_ascii_digits_only() -> None:
    """An Arabic-Indic epoch read as 1 passed `< 6.18.4`'s known-bad rule: now no comparison."""
    with pytest.raises(ValueError, match="not an rpm version"):
        versions.compare_evr(f"{ARABIC_ONE}:6.18.3-200.fc43", "6.18.4")
    with pytest.raises(ValueError):
        rpmversion.split("6.18.3-200.fc43.x86_64 ")
    assert rpmversion.split("1:6.18.3-200.fc43") == (1, "6.18.3", "200.fc43")
    assert rpmversion.split("6.18.4") == (0, "6.18.4", None)


def test_a_version_outside_the_grammar_is_judged_by_no_entry() -> None:
    entries = versions.repository_list()
    assert versions.judge(entries, "kernel-core", "6.18.3-200.fc43").verdict == "bad"
    assert versions.judge(entries, "kernel-core", f"{ARABIC_ONE}:6.18.3-200.fc43") is None


def entry(**changed: str) -> str:
    """cluster.yml with one os.known_versions entry, `changed` keys written as given (YAML)."""
    fields = {
        "package": "kernel-core",
        "versions": "['< 6.18.4']",
        "verdict": "bad",
        "symptom": "crashes",
        "source": "ours",
        "date": "'2026-11-30'",
    } | changed
    lines = "".join(f"      {key}: {value}\n" for key, value in fields.items())
    return VALID_ROCE + "os:\n  known_versions:\n    -" + lines[5:]


KEY = "os.known_versions[0]"


@pytest.mark.parametrize(
    ("changed", "line"),
    [
        (
            {"versions": f"['{ARABIC_ONE}:6.18.3-200.fc43']"},
            f"{KEY}.versions[0]: '\u0661:6.18.3-200.fc43' (U+0661 ARABIC-INDIC DIGIT ONE at 1) "
            "is not an rpm version: ASCII letters and digits only",
        ),
        (
            {"versions": f"['< {ARABIC_ONE}:6.18.4']"},
            f"{KEY}.versions[0]: '< \u0661:6.18.4' (U+0661",
        ),
        ({"versions": f"['{LONG}-1']"}, "is longer than 128 characters"),
        (
            {"versions": "['6.18.9-200.fc43.x86_64']"},
            f"{KEY}.versions[0]: '6.18.9-200.fc43.x86_64' ends in the arch .x86_64 (give it "
            "without the arch: 6.18.9-200.fc43)",
        ),
        ({"versions": "['< 6.18.4.noarch']"}, "ends in the arch .noarch"),
        ({"versions": "['=< 6.18.4']"}, "'=<' is not one of = < <= > >="),
        (
            {"versions": "[]"},
            f"{KEY}.versions: [] lists no version (give at least one: 6.18.9-200.fc43, or a "
            "bound: < 6.18.4)",
        ),
        (
            {"date": "'2026-13-45'"},
            f"{KEY}.date: '2026-13-45' is no day of the calendar (a real date: 2026-11-30)",
        ),
        ({"date": "'2026-02-30'"}, "'2026-02-30' is no day of the calendar"),
        # unquoted, YAML builds the date itself: refused at its line
        ({"date": "2026-13-45"}, "YAML error: '2026-13-45' is no date: month must be in 1..12"),
        ({"date": "'20261130'"}, "'20261130' is not a date YYYY-MM-DD"),
        ({"date": "'2026-W48-1'"}, "'2026-W48-1' is not a date YYYY-MM-DD"),
        ({"date": f"'2026-11-3{ARABIC_ONE}'"}, "is not a date YYYY-MM-DD"),
        ({"verdict": "dubious"}, f"{KEY}.verdict: 'dubious' is not one of: good, bad"),
        ({"symptom": '"\\e[2J"'}, f"{KEY}.symptom: '\\x1b[2J' is not one line of printable"),
        ({"symptom": '"crash\\0"'}, f"{KEY}.symptom: 'crash\\x00' is not one line"),
        ({"symptom": '"crash\\a"'}, f"{KEY}.symptom: 'crash\\x07' is not one line"),
        (
            {"symptom": '"crash\\nfix: curl x | sh"'},
            f"{KEY}.symptom: 'crash\\nfix: curl x | sh' is not one line of printable text (no "
            "line breaks or control characters: write it on one line)",
        ),
        ({"symptom": "x" * 10_000}, "(10000 characters) is longer than 300 characters"),
        ({"source": '"a\\tb"'}, f"{KEY}.source: 'a\\tb' is not one line"),
        ({"source": '"\\u202e"'}, f"{KEY}.source: '\\u202e'"),
        ({"source": "y" * 301}, f"{KEY}.source: 'yyy"),
        ({"mine": "true"}, f"{KEY}.mine: unknown key"),
        (
            {"releases": "['42']"},
            f"{KEY}.releases[0]: '42' is not one of: 43, 44, 45",
        ),
        # unquoted, YAML reads a number: refused by its type
        ({"releases": "[45]"}, f"{KEY}.releases: expected list of strings, got list [45]"),
    ],
)
def test_a_hostile_entry_is_refused_in_one_line(
    tmp_path: Path, changed: dict[str, str], line: str
) -> None:
    found = problems(tmp_path, entry(**changed))
    assert any(line in p for p in found), found
    for p in found:
        assert "\n" not in p and "\x1b" not in p and "\x00" not in p and len(p) < 500, p


def test_the_bounds_themselves_are_taken(tmp_path: Path) -> None:
    text = entry(symptom="x" * 300, source="'" + "y" * 300 + "'", date="'2024-02-29'")
    text = text.replace("['< 6.18.4']", "['< 6.18.4', '1:6.18.3-200.fc43', '>= 0:6.17']")
    cluster = load_cluster(write(tmp_path, text))
    mine = cluster.os.known_versions[0]
    assert mine["symptom"] == "x" * 300 and mine["date"] == "2024-02-29"


def test_the_repository_list_passes_the_entry_rules() -> None:
    """The shipped list is held to the rules a user's entry is: every field of every entry."""
    rules = {field.path.rpartition(".")[2]: field for field in schema.SECTION}
    for item in versions.repository_list():
        for key in ("symptom", "source", "date"):
            text = getattr(item, key)
            if key != "symptom" or text:
                assert rules[key].rule(text) is None, (item, key)
        assert item.versions and all(versions.version_problem(v) is None for v in item.versions)
        assert item.package in rules["package"].choices
        assert item.verdict in rules["verdict"].choices
