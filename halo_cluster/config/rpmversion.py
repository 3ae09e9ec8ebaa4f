"""rpm's version grammar, declared once: `[EPOCH:]VERSION-RELEASE` as `rpm -q --qf '%{EVR}'`
prints it. It is the rule of `upgrade --os --kernel/--firmware` and of every version in
`os.known_versions`, and its parse (`split`) is the one way into rpm's comparison
(roles/os/versions.py).

ASCII only: Python's `\\d` and str.isdigit() take Arabic-Indic and other digits, which int()
then reads (U+0661, ARABIC-INDIC DIGIT ONE, is 1), so the epoch is [0-9] under re.ASCII and
nothing else reaches int().
"""

from __future__ import annotations

import re

from halo_cluster.config.quoting import quote

MAX_LENGTH = 128  # Fedora's EVRs are under 40 characters; a longer value is no version
# the characters rpm takes in a version or a release (build/parsePreamble.c,
# ALLOWED_CHARS_VERREL "._+%{}~^", less the macro characters a built package never holds);
# neither holds a '-', which separates them
_PART = r"[A-Za-z0-9._+~^]+"
EVR = re.compile(
    rf"(?:(?P<epoch>[0-9]+):)?(?P<version>{_PART})(?:-(?P<release>{_PART}))?", re.ASCII
)
# the arches rpm appends in a NEVRA (`.x86_64`): never part of an EVR, and a known-bad list
# compared with `6.18.3-200.fc43.x86_64` would judge a version other than the one installed
ARCHES = (
    "x86_64", "noarch", "aarch64", "i686", "i386", "ppc64le", "s390x", "riscv64", "armv7hl",
    "src", "nosrc",
)  # fmt: skip
EXAMPLE = "6.18.9-200.fc43"


def problem(value: object, example: str = EXAMPLE, release: bool = True) -> str | None:
    """What makes `value` no EVR as rpm prints it, with the fix; None when it is one. Without
    `release`, `VERSION` alone is taken too (a bound of the known-versions list, `< 6.18.4`)."""
    how = f"give it as rpm prints it, without the arch: {example}"
    if not isinstance(value, str):
        return f"{quote(value)} is not a version ({how})"
    if len(value) > MAX_LENGTH:
        return f"{quote(value)} is longer than {MAX_LENGTH} characters ({how})"
    if not value.isascii():
        return f"{quote(value)} is not an rpm version: ASCII letters and digits only ({how})"
    arch = value.rpartition(".")[2]
    if "." in value and arch in ARCHES:
        return f"{quote(value)} ends in the arch .{arch} (give it without the arch: {example})"
    found = EVR.fullmatch(value)
    if found is None or (release and found["release"] is None):
        shape = "VERSION-RELEASE" if release else "VERSION[-RELEASE]"
        return f"{quote(value)} is not [EPOCH:]{shape} of letters, digits and . _ + ~ ^ ({how})"
    return None


def split(evr: str) -> tuple[int, str, str | None]:
    """(epoch, version, release) of a version `problem` takes (the release optional): no epoch
    is epoch 0, no release None. Any other text is a ValueError: rpm's comparison never sees
    it."""
    found = EVR.fullmatch(evr)
    if found is None or problem(evr, release=False) is not None:
        raise ValueError(f"not an rpm version: {quote(evr)}")
    return int(found["epoch"] or 0), found["version"], found["release"]
