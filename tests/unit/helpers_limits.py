"""/proc/PID/limits rows in the kernel's format, from PID 1's real /proc/1/limits
(tests/plan/fixtures/SOURCES.md: systemd's own 64 MiB), shared by the user manager's and verify's
memlock tests."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "plan" / "fixtures"
PID1_LIMITS = (FIXTURES / "proc-1-limits-systemd-archlinux.txt").read_text()
# the row the fact's grep prints, as the kernel printed it
PID1_ROW = next(line for line in PID1_LIMITS.splitlines() if line.startswith("Max locked memory"))
# the manager's row: the same format at the kernel's and Fedora's default of 8 MiB (`ulimit -l`
# 8192 on Fedora 40: systemd/systemd#33667); not a recording
MANAGER_ROW = PID1_ROW.replace("67108864             67108864", "8388608              8388608 ")
# the row with both columns unlimited, as a process with RLIM_INFINITY prints them
UNLIMITED_ROW = PID1_ROW.replace("67108864             67108864", "unlimited            unlimited")
# CapEff of a host's PID 1 (all 41 capabilities) and of a Docker container's PID 1 (no
# CAP_SYS_RESOURCE), as `grep Cap /proc/1/status` printed them (a learning-ebpf write-up, index
# id 60786049322; its repository is not named by the index)
HOST_CAPS, CONTAINER_CAPS = "000001ffffffffff", "00000000a80425fb"
