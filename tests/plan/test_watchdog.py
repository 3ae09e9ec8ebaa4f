"""The head's stall watchdog planned on recorded real outputs: its unit, program and settings on
the head only, enabled and started once, restarted when its settings change (nothing else is),
removed when `serve.watchdog_enabled` is off."""

from __future__ import annotations

import json
from pathlib import Path

from halo_cluster.roles.serve import stallwatch, watchdog
from tests.plan.harness import Plan, plan
from tests.plan.helpers_metrics import ALL, AUTHORIZATION, ON
from tests.plan.nodes import HOME, converged, plan_cluster, serve_cluster

UNIT, PROGRAM, SETTINGS = (f"{HOME}/{p}" for p in (watchdog.UNIT, watchdog.PROGRAM,
                                                    watchdog.SETTINGS))  # fmt: skip


def serve_ops(result: Plan, name: str) -> list[str]:
    return [
        op.name
        for op in result.ops[name]
        if op.name.startswith("Cluster services") and (op.commands or op.uploads)
    ]


def test_the_head_runs_the_watchdog_with_its_settings_and_no_secret() -> None:
    result = plan_cluster(serve_cluster(serve=", launcher: native, api_key_file: null"))
    head = result.uploads("halo1")
    assert head[PROGRAM] == Path(stallwatch.__file__).read_text()
    unit = head[UNIT].splitlines()
    assert "ExecStart=/usr/bin/python3 %h/.config/halo-cluster/watchdog.py " \
        "%h/.config/halo-cluster/watchdog.json" in unit  # fmt: skip
    assert "Restart=always" in unit and "WantedBy=default.target" in unit
    settings = stallwatch.Settings(**json.loads(head[SETTINGS]))
    assert settings.launcher == "native" and settings.url == "http://192.168.100.1:8000"
    assert (settings.timeout, settings.interval, settings.misses) == (20, 10, 3)
    assert settings.restarts_per_hour == 3
    assert settings.workers == [[
        "192.168.100.2", "ssh", "-n", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
        "-o", "StrictHostKeyChecking=yes", "vllm@192.168.100.2",
    ]]  # fmt: skip
    assert settings.secrets == f"{HOME}/.config/halo-cluster/secrets.env"  # read, never copied
    assert not any(p in result.uploads("halo2") for p in (UNIT, PROGRAM, SETTINGS))
    enable = [c for c in result.commands("halo1") if "halo-watchdog" in c and "enable" in c]
    assert len(enable) == 1 and "systemctl --user enable --now halo-watchdog" in enable[0]


def test_a_changed_bound_restarts_the_watchdog_only() -> None:
    before = serve_cluster()
    nodes = {n.name: converged(before, n.name) for n in before.nodes}
    result = plan(serve_cluster(serve=", watchdog_misses: 5"), nodes)
    assert serve_ops(result, "halo1") == [
        f"Cluster services | Watchdog file {SETTINGS}",
        "Cluster services | Reload the user's units",
        "Cluster services | Restart halo-watchdog",
    ]
    assert serve_ops(result, "halo2") == []


def test_watchdog_off_removes_it_from_the_head() -> None:
    before = serve_cluster()
    nodes = {n.name: converged(before, n.name) for n in before.nodes}
    result = plan(serve_cluster(serve=", watchdog_enabled: false"), nodes)
    assert serve_ops(result, "halo1") == ["Cluster services | Stop and remove the stall watchdog"]
    commands = "\n".join(result.commands("halo1"))
    assert "systemctl --user stop halo-watchdog.service" in commands
    assert f"{HOME}/{watchdog.WANTS}" in commands  # `enable`'s link goes with the unit
    assert serve_ops(result, "halo2") == []


def test_with_metrics_listen_all_it_is_given_the_headers_file_and_never_the_password(
    tmp_path,
) -> None:
    """Prometheus asks for its password with listen: all: the watchdog's settings name the
    metrics role's 0600 file (which the metrics role writes: tests/plan/test_metrics.py), read at
    each query; with listen: data, or metrics off, none."""
    (tmp_path / "pw").write_text("prometheus-secret\n")
    result = plan_cluster(serve_cluster(tmp_path=tmp_path, top=ALL))
    head = result.uploads("halo1")
    settings = stallwatch.Settings(**json.loads(head[SETTINGS]))
    assert settings.authorization == AUTHORIZATION and AUTHORIZATION in head
    assert "prometheus-secret" not in head[SETTINGS] + head[UNIT]
    token = head[AUTHORIZATION].split()[-1]
    assert not any(token in c or "prometheus-secret" in c for c in result.commands("halo1"))
    for top in (ON, ""):
        quiet = plan_cluster(serve_cluster(tmp_path=tmp_path, top=top)).uploads("halo1")
        assert stallwatch.Settings(**json.loads(quiet[SETTINGS])).authorization == ""
        assert AUTHORIZATION not in quiet
