"""verify's nothing_upgrades_behind_the_lock (tests/infra/autoupdate.py) on recorded outputs:
`systemctl show` of the real dnf5 and PackageKit units under systemd 252, `find` of the
offline-update trigger, and dnf5's own automatic.conf (tests/plan/fixtures/SOURCES.md)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

from halo_cluster.config.loader import parse_cluster
from halo_cluster.node.facts import TextFiles
from tests.infra import autoupdate
from tests.infra.conftest import _row
from tests.infra.target import FILES, WARN, Target
from tests.recorded import fixture, text_files_output
from tests.unit.helpers_native import NODES, RAY

NONE = "systemctl-show-autoupdate-none-systemd252.txt"
INSTALLED = "systemctl-show-autoupdate-installed-systemd252.txt"
TIMER_ON = "systemctl-show-autoupdate-timer-enabled-systemd252.txt"
MASKED = "systemctl-show-autoupdate-packagekit-masked-systemd252.txt"
DNF5_CONF = fixture("dnf5-automatic-conf-dnf5.conf")  # /usr/share/dnf5/dnf5-plugins/automatic.conf
USR, DEPRECATED, ETC = autoupdate.AUTOMATIC_CONFS


def judge(show: str, triggers: str = "", **texts: str) -> tuple[list[str], list[str]]:
    paths = {"usr": USR, "deprecated": DEPRECATED, "etc": ETC}
    confs = {USR: DNF5_CONF} | {paths[k]: v for k, v in texts.items()}
    return autoupdate.behind_the_lock(
        fixture(show).splitlines(), fixture(triggers).splitlines() if triggers else [], confs
    )


def applying(text: str, value: str) -> str:
    """dnf5's automatic.conf with apply_updates set: the copy its docs say to make, edited."""
    assert "\napply_updates = no\n" in text
    return text.replace("\napply_updates = no\n", f"\napply_updates = {value}\n")


def test_the_lab_nothing_installed_nothing_waiting() -> None:
    """The lab's nodes: neither installed, no trigger (find printed nothing)."""
    warnings, found = judge(NONE)
    assert warnings == []
    assert found == [
        "PackageKit not installed",
        "no offline update waiting",
        "dnf5-automatic not installed",
    ]


def test_packagekit_installed_is_a_warning_with_its_fix() -> None:
    """Fedora Workstation: PackageKit is D-Bus activated (static), installed is enough."""
    warnings, found = judge(INSTALLED)
    assert warnings == [
        "packagekit.service installed (static, inactive): GNOME Software, Cockpit and pkcon "
        "install updates through PackageKit, which ignores dnf's versionlock (PackageKit#677, "
        "cockpit-project/cockpit#21953); fix: systemctl mask --now packagekit.service (or dnf "
        "remove PackageKit)"
    ]
    assert found[2] == "dnf5-automatic.timer disabled, inactive: it never runs"


def test_packagekit_masked_and_the_timer_disabled_upgrade_nothing() -> None:
    warnings, found = judge(MASKED)
    assert warnings == [] and found[0] == "packagekit.service masked"


def test_the_timer_with_dnf5s_defaults_downloads_only() -> None:
    """apply_updates = no, the package's default: enabled and active, it installs nothing."""
    warnings, found = judge(TIMER_ON)
    assert [w for w in warnings if "dnf5-automatic" in w] == []
    assert found[2] == (
        "dnf5-automatic.timer enabled, active, apply_updates = no "
        "(/usr/share/dnf5/dnf5-plugins/automatic.conf): it downloads, installs nothing"
    )


@pytest.mark.parametrize("where", ["etc", "deprecated"])
def test_the_timer_applying_updates_is_a_warning_naming_the_file(where: str) -> None:
    """/etc/dnf/automatic.conf, or the deprecated file Cockpit writes: both override dnf5's."""
    warnings, _ = judge(TIMER_ON, **{where: applying(DNF5_CONF, "Yes")})
    path = ETC if where == "etc" else DEPRECATED
    assert warnings[1] == (
        f"dnf5-automatic.timer enabled, active, apply_updates = Yes ({path}): dnf5 automatic "
        "upgrades every package the lock does not hold on its timer; fix: systemctl disable "
        f"--now dnf5-automatic.timer, or apply_updates = no in {path}"
    )


def test_a_timer_enabled_through_its_alias_runs_from_the_next_boot() -> None:
    """`systemctl enable dnf-automatic.timer` without --now: enabled, inactive until a boot."""
    show = fixture("systemctl-show-dnf5-automatic-enabled-by-alias-systemd252.txt").splitlines()
    confs = {USR: DNF5_CONF, ETC: applying(DNF5_CONF, "1")}
    warnings, _ = autoupdate.behind_the_lock(show, [], confs)
    assert warnings == [
        "dnf5-automatic.timer enabled, inactive, apply_updates = 1 (/etc/dnf/automatic.conf): "
        "dnf5 automatic upgrades every package the lock does not hold on its timer; fix: "
        "systemctl disable --now dnf5-automatic.timer, or apply_updates = no in "
        "/etc/dnf/automatic.conf"
    ]


def test_a_later_file_wins_and_cockpits_reboot_is_said() -> None:
    """Cockpit appends `[commands]` with apply_updates and reboot to the deprecated file; the
    user's /etc/dnf/automatic.conf, read last, decides apply_updates."""
    cockpit = "[commands]\napply_updates = yes\n[commands]\nreboot = when-needed"
    warnings, _ = judge(TIMER_ON, deprecated=cockpit)
    assert "then reboots the node (reboot = when-needed)" in warnings[1]
    warnings, found = judge(TIMER_ON, deprecated=cockpit, etc="[commands]\napply_updates=off\n")
    assert len(warnings) == 1 and "apply_updates = off (/etc/dnf/automatic.conf)" in found[2]


def test_comments_and_other_sections_do_not_apply() -> None:
    text = (
        "#apply_updates = yes\n[emitters]\napply_updates = yes\n[commands]\n  apply_updates = yes\n"
    )
    warnings, found = judge(TIMER_ON, etc=text)
    assert len(warnings) == 1 and "apply_updates = no" in found[2]


def test_a_value_dnf5_refuses_installs_nothing() -> None:
    warnings, found = judge(TIMER_ON, etc="[commands]\napply_updates = sometimes\n")
    assert len(warnings) == 1 and "is no boolean: dnf5 automatic stops on it" in found[2]


def test_packagekits_offline_update_waiting_is_a_warning() -> None:
    warnings, found = judge(NONE, "find-system-update-packagekit.txt")
    assert warnings == [
        "PackageKit's offline update waits for the next boot (/system-update -> "
        "/var/lib/PackageKit/prepared-update): PackageKit installs it, which ignores dnf's "
        "versionlock (PackageKit#677, cockpit-project/cockpit#21953); fix: pkcon offline-cancel"
    ]
    assert found[1] == "/system-update -> PackageKit"


def test_dnf5s_own_offline_transaction_is_no_warning() -> None:
    """dnf5 offline / system-upgrade resolved it with the lock in effect."""
    warnings, found = judge(NONE, "find-system-update-dnf5-offline.txt")
    assert warnings == [] and "dnf5's offline transaction" in found[1]


def test_an_unknown_trigger_is_a_warning() -> None:
    warnings, _ = autoupdate.behind_the_lock([], ["/etc/system-update f "], {})
    assert warnings == [
        "/etc/system-update (f) makes the next boot an offline update, neither PackageKit's nor "
        "dnf5's: find what wrote it, or remove it"
    ]


def test_the_alias_is_shown_as_dnf5s_timer() -> None:
    """`dnf-automatic.timer` is a symlink to dnf5-automatic.timer: asking for it gives that
    unit's block, so the check asks for dnf5-automatic.timer alone."""
    assert fixture("systemctl-show-dnf-automatic-alias-systemd252.txt").startswith(
        "Id=dnf5-automatic.timer\n"
    )
    assert "dnf-automatic.timer" not in autoupdate.SHOW.split()


def test_the_reads_are_declared_in_the_nodes_one_read() -> None:
    target = Target(RAY, RAY.head, None)
    reads = target.first_reads([])
    assert autoupdate.SHOW in reads and autoupdate.TRIGGER_COMMAND in reads
    assert set(autoupdate.AUTOMATIC_CONFS) <= set(FILES)


def test_a_warning_is_its_own_status_in_the_summary() -> None:
    """A skip whose reason starts `WARN: `: the table's status, never a failure."""
    report = SimpleNamespace(
        nodeid="tests/infra/test_node.py::test_nothing_upgrades_behind_the_lock[node1]",
        user_properties=[("measured", "packagekit.service static, active")],
        passed=False,
        skipped=True,
        longrepr=("f", 1, f"Skipped: {WARN}: node1: packagekit.service installed"),
    )
    assert _row(report) == (
        "node1",
        "nothing_upgrades_behind_the_lock",
        WARN,
        "node1: packagekit.service installed",
    )


def locked_head(show: str, triggers: str = "") -> Target:
    """The head of a 2-node cluster with os.lock, its one read done: the check's commands'
    results recorded, dnf5's automatic.conf and an /etc/dnf/automatic.conf applying updates
    among its files."""
    text = "cluster_user: vllm\nos: {lock: true}\n" + NODES
    cluster = parse_cluster(yaml.safe_load(text))
    target = Target(cluster, cluster.head, None)
    files = text_files_output({USR: DNF5_CONF, ETC: applying(DNF5_CONF, "yes")})
    target._read[TextFiles().command(FILES)] = SimpleNamespace(rc=0, stdout="\n".join(files))
    target._read[autoupdate.SHOW] = SimpleNamespace(rc=0, stdout=fixture(show))
    trigger = fixture(triggers) if triggers else ""
    target._read[autoupdate.TRIGGER_COMMAND] = SimpleNamespace(rc=1, stdout=trigger)
    return target


def test_the_node_read_on_the_lab_says_what_it_found() -> None:
    assert locked_head(NONE).behind_the_lock() == (
        [],
        ["PackageKit not installed", "no offline update waiting", "dnf5-automatic not installed"],
    )


def test_the_node_read_on_a_workstation_warns_of_all_three() -> None:
    """PackageKit, its offline update and the timer applying (the head's /etc/dnf/automatic.conf
    says yes)."""
    warnings, _ = locked_head(TIMER_ON, "find-system-update-packagekit.txt").behind_the_lock()
    assert [w.split(" ")[0] for w in warnings] == [
        "packagekit.service",
        "PackageKit's",
        "dnf5-automatic.timer",
    ]
    assert "apply_updates = yes (/etc/dnf/automatic.conf)" in warnings[2]


def test_a_failed_systemctl_read_fails_the_check() -> None:
    """Not "not installed": systemctl that did not answer says nothing of the units."""
    head = locked_head(NONE)
    head._read[autoupdate.SHOW] = SimpleNamespace(rc=1, stdout="", stderr="Failed to connect")
    with pytest.raises(AssertionError, match="Unexpected exit code 1"):
        head.behind_the_lock()
