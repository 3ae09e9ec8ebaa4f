"""A node's reboot and how its new boot is told from the old one, shared by the reboot role's
`reboot_and_wait` and `halo-cluster upgrade --os` (which reboots over its own SSH): a marker in
/run (a tmpfs, empty after every boot); uptime cannot tell, since containers report the host's.
"""

from __future__ import annotations

BOOT_MARKER = "/run/halo-cluster/booted-before"
MARK = f"mkdir -p {BOOT_MARKER.rsplit('/', 1)[0]} && touch {BOOT_MARKER}"
REBOOT_DELAY = 1  # seconds REBOOT waits, so that the command returns over SSH first
REBOOT = f"( sleep {REBOOT_DELAY} && systemctl reboot ) </dev/null >/dev/null 2>&1 &"
NEW_BOOT = f"test ! -e {BOOT_MARKER}"
# is-system-running exits non-zero for "degraded": only the marker decides
BOOTED = f"{NEW_BOOT} && {{ systemctl is-system-running --wait >/dev/null; {NEW_BOOT}; }}"
