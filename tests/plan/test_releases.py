"""The node's Fedora release in the deploy's plan (roles/os/releases.py): read from its
/etc/os-release in the node's one read, it decides what the preflight expects there. Fedora 43
past its SUPPORT_END is a warning and deployed, 44 and 45 are deployed, an unknown release is
refused with the supported list, a cluster of two releases is refused on every node, and a
node is judged by its own release's known versions.

What Fedora 45 changes for the roles (podman 6, dnf5's repo folder, RPM signatures enforced) is
checked here against a plan on Fedora 45 nodes and podman 6's documented behaviour
(podman-container-tools/podman RELEASE_NOTES.md, 6.0.0): NOT VERIFIED on a live Fedora 45 with
podman 6, which neither the lab (Debian's podman 5.8) nor this machine has.
"""

from __future__ import annotations

import datetime
import logging
import re

import pytest

from halo_cluster.config.docs import page
from halo_cluster.roles import os as os_role
from tests.plan.harness import Plan, plan
from tests.plan.helpers_metrics import ON, metrics_plan
from tests.plan.nodes import HOME, cluster, fresh_node, refusal
from tests.recorded import fixture, strix_halo_versions, versions_output

F43 = fixture("os-release-fedora43-workstation.txt")
F44 = fixture("os-release-fedora44-workstation.txt")
# no Fedora 45 os-release is recorded anywhere (fixtures/SOURCES.md): the recorded 44 one with
# 45's numbers and end of support (fedora-release-45-14), NOT VERIFIED against a real file
F45 = F44.replace("44", "45").replace("SUPPORT_END=2027-05-19", "SUPPORT_END=2027-12-08")
PAGE = page("roles/os.md")  # the page a line names, as the tool finds it
TODAY = datetime.date(2026, 12, 4)  # the day issue 43 was worked on: Fedora 43 just left support


@pytest.fixture(autouse=True)
def day(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock is the one thing of the run a plan cannot record: fixed, so that the checks
    judge the recorded SUPPORT_END dates on one day."""
    monkeypatch.setattr(os_role, "today", lambda: TODAY)


@pytest.fixture
def log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="pyinfra")
    return caplog


def on(os_release: str, **over) -> dict:
    return fresh_node(files={"/etc/os-release": os_release}, **over)


def plan_of(halo1: dict, halo2: dict) -> Plan:
    return plan(cluster(), {"halo1": halo1, "halo2": halo2})


def fedora45_versions(kernel: str) -> list[str]:
    """The recorded Strix Halo's kernel and firmware packages as a Fedora 45 build of `kernel`
    (VERSION-RELEASE) and of the recorded firmware would name them."""
    running, packages = strix_halo_versions()
    old = running.rsplit(".", 1)[0]
    moved = [p.replace(old, kernel).replace(".fc43", ".fc45") for p in packages]
    return versions_output(f"{kernel}.x86_64", moved)


def test_a_fedora_44_cluster_is_deployed_with_what_its_release_gives(log) -> None:
    result = plan_of(on(F44), on(F44))
    assert not result.refused
    assert result.names("halo1")[0].startswith("Packages")
    assert (
        "preflight release: OK (Fedora 44, supported until 2027-05-19: dnf5, repos in "
        "/etc/yum.repos.d, podman 5.8, RPM signatures not enforced)"
    ) in log.text
    assert "preflight same release: OK (Fedora 44 on every node read)" in log.text


def test_fedora_43_past_its_support_end_is_a_warning_and_deployed(log) -> None:
    result = plan_of(on(F43), on(F43))
    assert not result.refused and result.names("halo1")
    warned = [r for r in log.records if "preflight release: WARN" in r.getMessage()]
    assert len(warned) == 2 and all(r.levelno == logging.WARNING for r in warned)
    assert (
        "release: WARN (Fedora 43 reached its end of support on 2026-12-02 (SUPPORT_END in "
        "/etc/os-release): no more updates, security ones included; upgrade to Fedora 45 "
        f"({PAGE}))"
    ) in warned[0].getMessage()


def test_an_unknown_release_is_refused_with_the_supported_list() -> None:
    """In one line: a release the tool does not know is not also called a mixed one."""
    f42 = F43.replace("VERSION_ID=43", "VERSION_ID=42")
    result = plan_of(on(f42), on(f42))
    for node in ("halo1", "halo2"):
        assert refusal(result, node) == (
            "Fedora 42 is not a supported release (Fedora 43, 44 or 45): install or "
            f"upgrade to Fedora 45 ({PAGE})"
        )


def test_a_mixed_cluster_is_refused_on_every_node_in_one_line() -> None:
    result = plan_of(on(F44), on(F45))
    mixed = (
        "every node of a cluster runs one release (one kernel stream, podman and dnf repos): "
        f"upgrade them to one ({PAGE})"
    )
    assert refusal(result, "halo1") == f"Fedora 44 here, but halo2 runs Fedora 45: {mixed}"
    assert refusal(result, "halo2") == f"Fedora 45 here, but halo1 runs Fedora 44: {mixed}"


def test_a_node_refused_for_its_release_still_makes_the_cluster_mixed() -> None:
    """Whichever node is judged first: the 43 node sees the 42 one its refusal took out."""
    result = plan_of(on(F43.replace("VERSION_ID=43", "VERSION_ID=42")), on(F43))
    assert refusal(result, "halo1").startswith("Fedora 42 is not a supported release")
    assert refusal(result, "halo2").startswith("Fedora 43 here, but halo1 runs Fedora 42: ")


def test_a_fedora_45_node_is_judged_by_its_own_releases_known_versions() -> None:
    """7.1.6 is known bad on every release; the good kernels the list knows are Fedora 43's,
    so the fix names no fc43 build."""
    bad = on(F45, versions=fedora45_versions("7.1.6-200.fc45"))
    result = plan_of(bad, on(F45, versions=fedora45_versions("7.1.8-200.fc45")))
    reason = refusal(result, "halo1")
    assert "known-bad kernel-core 7.1.6-200.fc45 (running): amdgpu graphics regression" in reason
    assert "source: ublue-os/aurora#2794" in reason
    assert (
        "fix: `halo-cluster upgrade --os --kernel VERSION` with a version the list does not call "
        "bad, or by hand install a kernel the list does not call bad"
    ) in reason
    assert "fc43" not in reason


def test_a_fedora_45_kernel_the_list_does_not_know_is_reported_and_deployed(log) -> None:
    versions = fedora45_versions("7.1.8-200.fc45")
    result = plan_of(on(F45, versions=versions), on(F45, versions=versions))
    assert not result.refused and result.names("halo1")
    assert (
        "preflight kernel: NOT VERIFIED (running 7.1.8-200.fc45: not in the known-versions list)"
    ) in log.text
    assert "preflight release: OK (Fedora 45, supported until 2027-12-08: dnf5, repos in " in (
        log.text
    )


# What podman 6.0.0 removed or changed (its RELEASE_NOTES.md, Breaking Changes and Changes), as
# the words a plan relying on it would carry
PODMAN6_REMOVED = {
    "CNI networking": re.compile(r"\bcni\b|containernetworking", re.I),
    "slirp4netns (and --network-cmd-path)": re.compile(r"slirp4netns|network-cmd-path", re.I),
    "iptables": re.compile(r"\biptables\b", re.I),
    "BoltDB": re.compile(r"bolt_state|boltdb", re.I),
    # --net=host now resolves host.containers.internal to 127.0.0.1 (#27823), not the host's IP
    "host.containers.internal": re.compile(r"host\.containers\.internal", re.I),
    # `podman quadlet install` now installs into subdirectories, no more `.app` files
    "podman quadlet install's layout": re.compile(r"podman quadlet|\.app\b"),
}


@pytest.fixture(scope="module")
def serving45(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """A serving cluster with metrics on Fedora 45 nodes, as a first deploy plans it (one plan
    for the module's checks)."""
    return metrics_plan(ON, tmp_path_factory.mktemp("f45"), {"/etc/os-release": F45})


def everything(result: Plan, node: str) -> str:
    return "\n".join([*result.commands(node), *result.uploads(node).values()])


@pytest.mark.parametrize("removed", sorted(PODMAN6_REMOVED))
def test_on_fedora_45_nothing_relies_on_what_podman_6_removed(serving45, removed) -> None:
    assert not serving45.refused
    for node in ("halo1", "halo2"):
        found = PODMAN6_REMOVED[removed].search(everything(serving45, node))
        assert found is None, f"{node}: the plan relies on {removed}: {found}"


def test_on_fedora_45_every_quadlet_is_on_the_host_network_in_the_users_search_path(
    serving45,
) -> None:
    """Podman 6 turns network isolation on by default (#27349): isolation is between podman's
    own networks, so a container on the host's network, as every quadlet of ours, is not
    isolated from the data link; the files are written by the deploy itself (no `podman quadlet
    install`) into ~/.config/containers/systemd, the rootless search path of podman 5.8 and 6
    alike (podman 6 only adds /usr/share/containers/systemd/users)."""
    quadlets = {
        path: text
        for node in ("halo1", "halo2")
        for path, text in serving45.uploads(node).items()
        if path.endswith(".container")
    }
    assert {p.rsplit("/", 1)[1] for p in quadlets} >= {
        "halo-ray.container",
        "halo-vllm.container",
        "halo-prometheus.container",
    }
    for path, text in quadlets.items():
        assert path.startswith(f"{HOME}/.config/containers/systemd/"), path
        assert re.findall(r"^Network=(.*)$", text, re.M) == ["host"], path


def test_on_fedora_45_the_deploy_writes_no_repo_file_and_installs_nothing_unsigned(
    serving45,
) -> None:
    """Fedora 45 moves the repo files to /usr/share/dnf5/repos.d and enforces RPM signatures:
    the deploy adds no repository (it installs from the release's own, signed ones, wherever
    they are) and never installs a package file or skips a signature check."""
    for node in ("halo1", "halo2"):
        for path in serving45.uploads(node):
            assert not re.match(r"/etc/yum\.repos\.d/|/usr/share/dnf5/repos\.d/", path), path
        for command in serving45.commands(node):
            assert not re.search(
                r"--nogpgcheck|gpgcheck=0|pkgverify|rpm -[iU]|\.rpm\b|config-manager", command
            ), command
    installs = [c for c in serving45.commands("halo1") if re.search(r"\bdnf\b.* install ", c)]
    assert installs, "the packages role installs with dnf"
