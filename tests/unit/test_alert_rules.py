"""The cluster's alert rules (templates/metrics/alerts.yml.j2) with real promtool: `check rules`
on them as rendered, and `test rules` on synthetic series (tests/unit/fixtures/
alert_rules_test.yml), where every alert fires in one case and stays silent in another. The
fixture's expected alerts get their annotations from the rendered rules, as Prometheus would
give them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from halo_cluster.roles.metrics import alerts
from tests.unit.helpers_promtool import run

FIXTURE = Path(__file__).parent / "fixtures" / "alert_rules_test.yml"


def rules(bounds: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Each alert's rule, by name, as rendered."""
    rendered = yaml.safe_load(alerts.render(bounds))
    return {rule["alert"]: rule for group in rendered["groups"] for rule in group["rules"]}


def with_annotations(tests: dict[str, Any], found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    for case in tests["tests"]:
        for check in case["alert_rule_test"]:
            for expected in check["exp_alerts"]:
                expected["exp_annotations"] = found[check["alertname"]]["annotations"]
    return tests


def promtool_test(tmp_path: Path, bounds: dict[str, Any] | None = None):
    (tmp_path / alerts.TARGET).write_text(alerts.render(bounds))
    tests = with_annotations(yaml.safe_load(FIXTURE.read_text()), rules(bounds))
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests))
    return run("test", "rules", "tests.yml", cwd=tmp_path)


def test_the_rules_pass_promtools_check(tmp_path: Path) -> None:
    (tmp_path / alerts.TARGET).write_text(alerts.render())
    result = run("check", "rules", alerts.TARGET, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


def test_every_alert_is_tested_firing_and_silent() -> None:
    checks = [
        check
        for case in yaml.safe_load(FIXTURE.read_text())["tests"]
        for check in case["alert_rule_test"]
    ]
    fired = {check["alertname"] for check in checks if check["exp_alerts"]}
    silent = {check["alertname"] for check in checks if not check["exp_alerts"]}
    assert fired == set(rules()), "alerts never tested firing or unknown"
    assert silent == set(rules()), "alerts never tested silent or unknown"


def test_every_alert_fires_and_stays_silent_as_expected(tmp_path: Path) -> None:
    result = promtool_test(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_configured_bounds_reach_the_rules(tmp_path: Path) -> None:
    # the healthy cluster's node2 (4.5 GiB available, 89 °C) and KV cache (94%) are over the
    # moved bounds: those three alerts fire there, and only those
    moved = {"memory_available_gib": 5, "temperature_celsius": 85, "kv_cache_percent": 90}
    assert set(moved) == set(alerts.DEFAULTS)
    result = promtool_test(tmp_path, moved)
    assert result.returncode != 0
    failed = {
        line.split("alertname: ")[1].split(",")[0]
        for line in (result.stdout + result.stderr).splitlines()
        if "alertname: " in line
    }
    assert failed == {"NodeMemoryAvailableLow", "NodeTemperatureHigh", "VllmKvCacheNearlyFull"}
