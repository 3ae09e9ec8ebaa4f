"""A node removed from cluster.yml leaves the cluster (issue 25, item 3), planned on the
recorded nodes: the lock's `left` makes the head ask the departed node over the data link, take
its services out when they are there, and say so in one line; nothing is asked without one."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from halo_cluster.config import lock as locks
from halo_cluster.roles.serve.facts import DepartedServices
from tests.plan.harness import fact_reads, plan, run_on_controller
from tests.plan.nodes import HOME, RESOLVED, converged, serve_cluster, user_node

NAME = "docker.io/kyuz0/vllm-therock-gfx1151"
OTHER = "sha256:" + "ab" * 32
GONE = "192.168.100.3"  # halo3's data address, recorded in the lock when it was a member
TAKE_OUT = f"Cluster services | Take halo3 ({GONE}) out of the cluster"


def departed_cluster(tmp_path: Path):
    """A 2-node serving config whose lock still records halo3 as a member: halo3 left."""
    members = tuple(locks.Member(f"halo{i}", f"192.168.100.{i}") for i in (1, 2, 3))
    lock = locks.Lock("halo1", f"{NAME}:latest", RESOLVED, members=members)
    locks.write(tmp_path / locks.LOCK_FILE, lock)
    return serve_cluster(tmp_path=tmp_path)


def planned(tmp_path: Path, departed: list[str], caplog=None):
    """The converged 2-node cluster planned, the head's probe answering `departed` (the
    `ADDRESS STATUS` lines DepartedServices prints); the log holds this plan's lines only."""
    cluster = departed_cluster(tmp_path)
    head = converged(cluster, "halo1")
    head[DepartedServices] = departed
    nodes = {"halo1": head, "halo2": converged(cluster, "halo2")}
    if caplog is not None:
        caplog.set_level(logging.INFO)
        caplog.clear()
    return plan(cluster, nodes)


def test_the_head_takes_a_departed_node_out_over_the_data_link(tmp_path: Path, caplog) -> None:
    result = planned(tmp_path, [f"{GONE} 0"], caplog)
    assert TAKE_OUT in result.names("halo1")
    assert TAKE_OUT not in result.names("halo2")
    op = next(o for o in result.ops["halo1"] if o.name == TAKE_OUT)
    ssh, history = op.commands[:2]
    assert ssh.startswith("runuser -u vllm -- ")
    assert (
        "ssh -n -o BatchMode=yes -o ConnectTimeout=5 -o StrictHostKeyChecking=yes "
        f"vllm@{GONE} " in ssh
    )
    remote = ssh.split(f"vllm@{GONE} ", 1)[1]
    steps = [
        "systemctl --user stop halo-vllm.service halo-ray.service",
        '"$HOME"/.config/containers/systemd/halo-ray.container',
        '"$HOME"/.config/containers/systemd/halo-vllm.container',
        "systemctl --user daemon-reload",
        "podman rm --force --ignore halo-vllm halo-ray",
    ]
    positions = [remote.find(step) for step in steps]
    assert -1 not in positions and positions == sorted(positions), remote
    assert "runuser" not in remote  # on the node it runs as the user it logged in as
    assert '"event":"member-left"' in history and f'"address":"{GONE}"' in history
    assert '"stopped":true' in history and '"token_rotated":true' in history
    # the line is said when the operation runs, not while planning
    assert "left the cluster" not in caplog.text


def test_the_departed_node_is_probed_in_the_heads_one_read_only(tmp_path: Path) -> None:
    result = planned(tmp_path, [f"{GONE} 2"])
    probe = "ls ~/.config/containers/systemd/halo-*.container"
    assert probe in " ".join(fact_reads(result, "halo1"))
    assert probe not in " ".join(fact_reads(result, "halo2"))
    assert len(fact_reads(result, "halo1")) == 1


def test_a_node_whose_services_are_gone_is_only_said(tmp_path: Path, caplog) -> None:
    result = planned(tmp_path, [f"{GONE} 2"], caplog)
    assert TAKE_OUT not in result.names("halo1")
    assert f"halo3 ({GONE}) left the cluster: none of its services remain" in caplog.text


def test_an_unreachable_departed_node_is_a_warning_line(tmp_path: Path, caplog) -> None:
    result = planned(tmp_path, [f"{GONE} 255"], caplog)
    assert TAKE_OUT not in result.names("halo1")
    assert (
        f"halo3 ({GONE}) left the cluster but cannot be reached: its services may still run; "
        "the rotated Ray token keeps it out"
    ) in caplog.text
    assert "WARN" in caplog.text


def test_a_departed_nodes_host_key_stays_pinned(tmp_path: Path) -> None:
    """The head logs in to a departed node with the key the launcher pinned for it: the line
    stays in our known_hosts block while the node is in `left`; another address's goes."""
    cluster = departed_cluster(tmp_path)
    known_hosts = f"{HOME}/.ssh/known_hosts"
    pinned = plan(cluster, {n: user_node() for n in ("halo1", "halo2")}).uploads("halo1")
    ours = f"{GONE} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGone"
    stale = "192.168.100.9 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIStale"
    end = "# END halo-cluster"
    text = pinned[known_hosts].replace(end, f"{ours}\n{stale}\n{end}")
    head = user_node(files={known_hosts: (text, "600")})
    written = plan(cluster, {"halo1": head, "halo2": user_node()}).uploads("halo1")[known_hosts]
    assert f"\n{ours}\n" in written and stale not in written
    assert written == pinned[known_hosts].replace(end, f"{ours}\n{end}")


def test_no_departed_node_no_probe(tmp_path: Path) -> None:
    cluster = serve_cluster(tmp_path=tmp_path)
    result = plan(cluster, {n: converged(cluster, n) for n in ("halo1", "halo2")})
    # the probe, not the file read of any user's quadlets (`/home/*/...`, the leftovers' check)
    probe = DepartedServices().command("vllm", ("192.168.100.2",)).split("; ")[1]
    assert "ssh -n" in probe
    assert "ssh -n" not in " ".join(fact_reads(result, "halo1"))


TOKEN_OP = "Cluster services | Ray's token in {} (rotated: halo3 left)"
RECORD_OP = "Cluster services | Record the members in {}"


def test_the_deploy_records_the_departure_and_rotates_the_token_when_it_runs(
    tmp_path: Path, monkeypatch
) -> None:
    """Issue 34, item 2: planning writes nothing (a dry run, drift), and gives every node the
    token the run writes; the head's operations write it, then the lock's members, when they
    run. An interrupted upgrade's `trial` survives (the upgrade's own deploy records members)."""
    cluster = departed_cluster(tmp_path)
    lock, token = tmp_path / locks.LOCK_FILE, Path(cluster.serve.ray_token_file)
    trial = locks.read(lock)[0]
    assert trial is not None
    locks.write(lock, replace(trial, trial=True, previous=locks.Build(OTHER)))
    monkeypatch.setenv(locks.UPGRADING, "1")
    before = (lock.read_bytes(), token.read_bytes(), token.stat().st_mtime_ns)
    head = user_node()
    head[DepartedServices] = [f"{GONE} 0"]
    result = plan(cluster, {"halo1": head, "halo2": user_node()})
    assert (lock.read_bytes(), token.read_bytes(), token.stat().st_mtime_ns) == before
    names = (TOKEN_OP.format(token), RECORD_OP.format(lock.resolve()))
    ops = result.names("halo1")
    assert ops.index(names[0]) < ops.index(names[1]) < ops.index(TAKE_OUT)
    assert not set(names) & set(result.names("halo2"))
    new = {result.uploads(n)[f"{HOME}/.config/halo-cluster/ray-token"] for n in ("halo1", "halo2")}
    assert len(new) == 1 and new != {token.read_text()}
    run_on_controller(result, "halo1", names)
    assert {token.read_text()} == new and token.stat().st_mode & 0o777 == 0o600
    recorded = locks.read(lock)[0]
    assert recorded is not None and recorded.trial and recorded.previous == locks.Build(OTHER)
    assert [m.name for m in recorded.members] == ["halo1", "halo2"]
    assert [(d.name, d.data_address) for d in recorded.left] == [("halo3", GONE)]
    again = serve_cluster(tmp_path=tmp_path)
    assert (again.container.leaving, again.container.unrecorded) == ((), False)
    nodes = {n: converged(again, n) for n in ("halo1", "halo2")}
    assert not set(names) & set(plan(again, nodes).names("halo1"))


def test_the_first_deploy_makes_the_token_it_gives_the_nodes(tmp_path: Path) -> None:
    cluster = serve_cluster(tmp_path=tmp_path)
    token = Path(cluster.serve.ray_token_file)
    token.unlink()
    token.parent.rmdir()
    result = plan(cluster, {n: user_node() for n in ("halo1", "halo2")})
    name = f"Cluster services | Ray's token in {token} (made)"
    assert name in result.names("halo1") and not token.parent.exists()
    run_on_controller(result, "halo1", (name,))
    assert token.read_text() == result.uploads("halo2")[f"{HOME}/.config/halo-cluster/ray-token"]
    assert (token.stat().st_mode & 0o777, token.parent.stat().st_mode & 0o777) == (0o600, 0o700)
