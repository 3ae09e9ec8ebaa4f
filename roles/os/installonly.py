"""The kernel a lock holds, kept through dnf5's install-only rotation.

dnf5 removes the oldest install-only packages whenever more are installed than
`installonly_limit`, in any transaction and whatever versionlock.toml says (dnf5#2368 and
#2127, both open; reproduced in the lab's Fedora 45 with dnf5 5.4.6: a locked kernel-core
removed by `dnf install ethtool`). With `os.lock: true` the limit is lifted (0: unlimited,
dnf5.conf(5)) in /etc/dnf/dnf.conf itself, since that file is read after every drop-in folder
and Fedora's sets `installonly_limit=3`; the line it replaces is kept in the comment above ours,
and put back when the lock goes.
"""

from __future__ import annotations

import re

DNF_CONF = "/etc/dnf/dnf.conf"
MARK = "# halo-cluster os.lock: no install-only rotation (dnf5#2368); the line before: "
NONE = "(none)"
UNLIMITED = "installonly_limit=0"
_LIMIT = re.compile(r"\s*installonly_limit\s*=")


def held(text: str | None) -> str:
    """`text` (dnf.conf) with the limit lifted in its [main] section."""
    lines = (text or "").splitlines()
    if any(line.startswith(MARK) for line in lines):
        return text or ""
    out, section, done = [], "", False
    for line in lines:
        if line.strip().startswith("["):
            if section == "[main]" and not done:
                out += [MARK + NONE, UNLIMITED]
                done = True
            section = line.strip()
        if section == "[main]" and not done and _LIMIT.match(line):
            out += [MARK + line, UNLIMITED]
            done = True
            continue
        out.append(line)
    if not done:
        out += ([] if section == "[main]" else ["[main]"]) + [MARK + NONE, UNLIMITED]
    return "\n".join(out) + "\n"


def released(text: str | None) -> str | None:
    """`text` as it was before `held`; None when there is nothing of ours to take out."""
    lines = (text or "").splitlines()
    if not any(line.startswith(MARK) for line in lines):
        return None
    out, ours = [], False
    for line in lines:
        if line.startswith(MARK):
            before = line[len(MARK) :]
            out += [] if before == NONE else [before]
            ours = True
            continue
        if ours and line.strip() == UNLIMITED:
            ours = False
            continue
        ours = False
        out.append(line)
    return "\n".join(out) + "\n"
