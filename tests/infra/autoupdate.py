"""What would upgrade a node's packages behind `os.lock` (verify's `nothing_upgrades_behind_the_
lock`): PackageKit, its offline update waiting for the next boot, and dnf5's automatic updates.

Decided from the units' states (`systemctl show`, one block per unit), the offline-update
trigger systemd boots into (`/system-update`, or `/etc/system-update`) and dnf5 automatic's
configuration files, in the order dnf5 reads them (dnf5-plugins/automatic_plugin/automatic.cpp,
`pre_configure`: a later file's value wins).
"""

from __future__ import annotations

from halo_cluster.tools.status.read import show_blocks

PACKAGEKIT = "packagekit.service"
# dnf5-plugin-automatic's one timer; its `dnf-automatic.timer` is a symlink to it (systemctl
# shows the alias as this unit's block), and dnf 4's dnf-automatic-*.timer went with dnf 4's
# dnf-automatic, which dnf5-plugin-automatic obsoletes on Fedora > 40 (dnf5.spec)
AUTOMATIC = "dnf5-automatic.timer"
SHOW = f"systemctl show -p Id,LoadState,ActiveState,UnitFileState {PACKAGEKIT} {AUTOMATIC}"
TRIGGERS = ("/system-update", "/etc/system-update")
TRIGGER_COMMAND = f"find {' '.join(TRIGGERS)} -maxdepth 0 -printf '%p %y %l\\n'"
AUTOMATIC_CONFS = (
    "/usr/share/dnf5/dnf5-plugins/automatic.conf",  # the package's defaults: apply_updates = no
    "/etc/dnf/dnf5-plugins/automatic.conf",  # deprecated, still read: Cockpit writes this one
    "/etc/dnf/automatic.conf",
)
# where the trigger points: PackageKit's prepared transaction (lib/pk-offline-private.h), or
# dnf5's own (`dnf5 offline`, `dnf5 system-upgrade`: libdnf5's offline DEFAULT_DATADIR)
PACKAGEKIT_PREPARED = (
    "/var/lib/PackageKit/prepared-update",
    "/var/lib/PackageKit/prepared-upgrade",
)
DNF5_OFFLINE = "/usr/lib/sysimage/libdnf5/offline"
# libdnf5's OptionBool, case-insensitive
TRUE, FALSE = ("1", "yes", "true", "on"), ("0", "no", "false", "off")
ENABLED = ("enabled", "enabled-runtime", "linked", "linked-runtime")
IGNORES_THE_LOCK = "which ignores dnf's versionlock (PackageKit#677, cockpit-project/cockpit#21953)"


def commands_setting(texts: dict[str, str], key: str) -> tuple[str, str] | None:
    """(value, file) of `[commands] KEY` as dnf5 automatic ends up with it: the last of
    AUTOMATIC_CONFS that sets it (a file without it leaves the earlier value), None when none
    does. dnf5's ini grammar: `#` or `;` at a line's start is a comment, `[section]`, `key = value`
    at the line's start, the value's quotes dropped."""
    found = None
    for path in AUTOMATIC_CONFS:
        section = ""
        for line in texts.get(path, "").splitlines():
            stripped = line.strip()
            if not stripped or line[0] in "#;":
                continue
            if stripped.startswith("["):
                section = stripped[1:].partition("]")[0]
            elif section == "commands" and not line[0].isspace() and "=" in line:
                name, _, value = line.partition("=")
                value = value.strip()
                if len(value) > 1 and value[0] == value[-1] and value[0] in "\"'":
                    value = value[1:-1]
                if name.strip() == key:
                    found = (value, path)
    return found


def automatic(state: dict[str, str], texts: dict[str, str]) -> tuple[str | None, str]:
    """(warning or None, what was found) for dnf5-automatic.timer."""
    load, active, unit_file = (
        state.get(k, "") for k in ("LoadState", "ActiveState", "UnitFileState")
    )
    if load in ("", "not-found"):
        return None, "dnf5-automatic not installed"
    if load == "masked" or (unit_file not in ENABLED and active != "active"):
        return None, f"{AUTOMATIC} {unit_file or load}, {active}: it never runs"
    where = f"{AUTOMATIC} {unit_file}, {active}"
    setting = commands_setting(texts, "apply_updates")
    value, path = setting or ("no", "dnf5's default")
    if value.lower() in FALSE:
        return None, f"{where}, apply_updates = {value} ({path}): it downloads, installs nothing"
    if value.lower() not in TRUE:
        return None, (
            f"{where}: apply_updates = {value!r} in {path} is no boolean: dnf5 automatic stops "
            "on it, installs nothing"
        )
    reboot = commands_setting(texts, "reboot")
    reboots = (
        f", then reboots the node (reboot = {reboot[0]})" if reboot and reboot[0] != "never" else ""
    )
    return (
        f"{where}, apply_updates = {value} ({path}): dnf5 automatic upgrades every package the "
        f"lock does not hold on its timer{reboots}; fix: systemctl disable --now {AUTOMATIC}, or "
        f"apply_updates = no in {path}"
    ), where


def packagekit(state: dict[str, str]) -> tuple[str | None, str]:
    """(warning or None, what was found) for packagekit.service: D-Bus activated (static), so
    installed is enough for GNOME Software, Cockpit or pkcon to start it."""
    load, active, unit_file = (
        state.get(k, "") for k in ("LoadState", "ActiveState", "UnitFileState")
    )
    if load in ("", "not-found"):
        return None, "PackageKit not installed"
    if load == "masked":
        return None, f"{PACKAGEKIT} masked"
    return (
        f"{PACKAGEKIT} installed ({unit_file}, {active}): GNOME Software, Cockpit and pkcon "
        f"install updates through PackageKit, {IGNORES_THE_LOCK}; fix: systemctl mask --now "
        f"{PACKAGEKIT} (or dnf remove PackageKit)"
    ), f"{PACKAGEKIT} {unit_file}, {active}"


def trigger(lines: list[str]) -> tuple[str | None, str]:
    """(warning or None, what was found) for the offline-update trigger: `find`'s `PATH TYPE
    TARGET` line of each trigger that exists."""
    for line in lines:
        path, _, rest = line.partition(" ")
        kind, _, target = rest.partition(" ")
        if path not in TRIGGERS:
            continue
        if target in PACKAGEKIT_PREPARED:
            return (
                f"PackageKit's offline update waits for the next boot ({path} -> {target}): "
                f"PackageKit installs it, {IGNORES_THE_LOCK}; fix: pkcon offline-cancel"
            ), f"{path} -> PackageKit"
        if target == DNF5_OFFLINE:
            return None, f"{path} -> dnf5's offline transaction (resolved by dnf5, with the lock)"
        said = f" -> {target}" if target else f" ({kind})"
        return (
            f"{path}{said} makes the next boot an offline update, neither PackageKit's nor dnf5's: "
            f"find what wrote it, or remove it"
        ), f"{path}{said}"
    return None, "no offline update waiting"


def behind_the_lock(
    show: list[str], triggers: list[str], texts: dict[str, str]
) -> tuple[list[str], list[str]]:
    """(warnings, what was found) on one node: `show` the lines of SHOW, `triggers` those of
    TRIGGER_COMMAND, `texts` {path: text} of the AUTOMATIC_CONFS that exist."""
    units = {block.get("Id", ""): block for block in show_blocks(show)}
    found = [
        packagekit(units.get(PACKAGEKIT, {})),
        trigger(triggers),
        automatic(units.get(AUTOMATIC, {}), texts),
    ]
    return [w for w, _ in found if w], [seen for _, seen in found]
