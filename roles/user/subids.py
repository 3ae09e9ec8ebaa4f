"""The cluster user's subordinate uid and gid ranges, which rootless podman maps an image's
files into: an existing user without them (one of SSSD or LDAP, which useradd never saw) fails
the image pull, so the preflight says so before anything changes.

As shadow-utils reads them (lib/subordinateio.c, lib/nss.c): a line of /etc/subuid or
/etc/subgid is `OWNER:START:COUNT`, OWNER the user's name or its uid; with a `subid: MODULE`
line in /etc/nsswitch.conf other than `files`, that module alone answers (libsubid_MODULE.so)
and the files are not read.
"""

from __future__ import annotations

import shlex

from halo_cluster.config.quoting import quote
from halo_cluster.decide.preflight import FAIL, NOT_VERIFIED, OK, WARN, Check

SUBUID, SUBGID, NSSWITCH = "/etc/subuid", "/etc/subgid", "/etc/nsswitch.conf"
# useradd's defaults when login.defs sets none (SUB_UID_MIN, SUB_UID_COUNT; the same for gids);
# podman needs 65536 ids for an image with files owned up to 65534 (nobody)
FIRST, COUNT = 100000, 65536
NAME = "subordinate ids"


def ranges(text: str | None, user: str, uid: int | None) -> list[tuple[int, int]]:
    """[(start, count)] the file gives the user: lines owned by its name or its uid."""
    owners = {user} | ({str(uid)} if uid is not None else set())
    found = []
    for line in (text or "").splitlines():
        fields = line.strip().split(":")
        if len(fields) != 3 or fields[0] not in owners:
            continue
        if fields[1].isdigit() and fields[2].isdigit() and int(fields[2]) > 0:
            found.append((int(fields[1]), int(fields[2])))
    return found


def free_start(text: str | None) -> int:
    """The first id above every range of the file (at least useradd's first): a range from
    there overlaps no other user's."""
    ends = [FIRST]
    for line in (text or "").splitlines():
        fields = line.strip().split(":")
        if len(fields) == 3 and fields[1].isdigit() and fields[2].isdigit():
            ends.append(int(fields[1]) + int(fields[2]))
    return max(ends)


def nss_module(nsswitch: str | None) -> str | None:
    """The module of nsswitch.conf's first non-empty `subid:` line, unless it is `files`."""
    for line in (nsswitch or "").splitlines():
        if line.startswith("#") or line[:6].lower() != "subid:":
            continue
        words = line[6:].split()
        if words:
            return None if words[0] == "files" else words[0]
    return None


def check(
    user: str,
    uid: int | None,
    local: bool,
    exists: bool,
    files: dict[str, str | None],
) -> Check:
    """The preflight line of the user's ranges. `exists`: NSS or /etc/passwd has the user;
    `local`: /etc/passwd does; `files`: the text of /etc/subuid, /etc/subgid, nsswitch.conf."""
    if not exists:
        if files[SUBUID] is None or files[SUBGID] is None:
            return Check(
                NAME,
                WARN,
                f"{user} is created by the deploy, but {SUBUID} or {SUBGID} is missing: useradd "
                "gives no ranges then and rootless podman cannot pull the image; "
                f"`touch {SUBUID} {SUBGID}` first",
            )
        return Check(NAME, OK, f"{user} is created by the deploy: useradd gives it ranges")
    module = nss_module(files[NSSWITCH])
    if module is not None:
        return Check(
            NAME,
            NOT_VERIFIED,
            f"{NSSWITCH} takes the ranges from {quote(module)} (subid:), which the deploy "
            f"does not read: `getsubids {shlex.quote(user)}` and `getsubids -g "
            f"{shlex.quote(user)}` on the node show them",
        )
    found = {path: ranges(files[path], user, uid) for path in (SUBUID, SUBGID)}
    missing = [path for path, given in found.items() if not given]
    if missing:
        where = "" if local else " (not in /etc/passwd: SSSD or LDAP, which useradd never saw)"
        return Check(
            NAME,
            FAIL,
            f"cluster_user {user}{where} has no range in {' nor '.join(missing)}: rootless "
            f"podman cannot pull the image; fix: {_fix(user, local, missing, files)}",
            refuses=True,
        )
    counts = {path: sum(count for _, count in given) for path, given in found.items()}
    text = ", ".join(f"{path} {count}" for path, count in counts.items())
    short = [path for path, count in counts.items() if count < COUNT]
    if short:
        return Check(
            NAME,
            WARN,
            f"{user}: {text} ids, under {COUNT} in {', '.join(short)}: an image with files "
            "owned by a higher id (up to 65534, nobody) fails to pull",
        )
    return Check(NAME, OK, f"{user}: {text} ids")


def _fix(user: str, local: bool, missing: list[str], files: dict[str, str | None]) -> str:
    """A range from above every other user's, for each file that lacks one: usermod for a
    local user, else the line itself (usermod edits only the users of /etc/passwd)."""
    q = shlex.quote(user)
    if local:
        options = " ".join(
            f"--add-{'subuids' if path == SUBUID else 'subgids'} "
            f"{free_start(files[path])}-{free_start(files[path]) + COUNT - 1}"
            for path in missing
        )
        # usermod refuses --add-subuids while the file does not exist
        absent = [path for path in missing if files[path] is None]
        touch = f"touch {' '.join(absent)} && " if absent else ""
        return f"`{touch}usermod {options} {q}`"
    lines = "; ".join(f"echo {q}:{free_start(files[path])}:{COUNT} >> {path}" for path in missing)
    return f"`{lines}` (or the ranges from SSSD: `subid: sss` in {NSSWITCH})"
