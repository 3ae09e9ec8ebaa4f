"""Kernel command line editing, as grubby does it, on the plain-text files Fedora boots from.

Pure functions: text in, text out. Only the arguments we manage change; every other argument keeps
its place and spelling, every other line stays byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PROC_CMDLINE = "/proc/cmdline"  # the arguments the running kernel booted with

# A token is a run of non-space characters, where a double-quoted part may contain spaces.
_TOKEN = re.compile(r'(?:[^\s"]+|"[^"]*")+')
_GRUB_LINE = re.compile(r'^(GRUB_CMDLINE_LINUX=)(["\']?)(.*?)\2[ \t]*$', re.MULTILINE)
_OPTIONS_LINE = re.compile(r"^(options[ \t]+)(.*?)[ \t]*$", re.MULTILINE)
_VERSION_LINE = re.compile(r"^version[ \t]+(\S+)", re.MULTILINE)

# amdgpu's `gttsize` is deprecated from Linux 6.15 (the amd-drm-next-6.15-2025-02-21 pull: "Mark
# gttsize parameter as deprecated"; amdgpu_ttm.c then takes the GTT size from ttm.pages_limit and
# warns "Configuring gttsize via module parameter is deprecated, please use ttm.pages_limit", as
# the recorded 6.17 dmesg shows), with the plan to drop it after the next LTS (6.18); 6.19.5's
# amdgpu still lists it. Where the kernel takes the GTT size from ttm.pages_limit alone, the tool
# writes ttm.pages_limit only, and takes its own gttsize away (docs/roles/kernel.md).
GTTSIZE = "amdgpu.gttsize"
GTTSIZE_DEPRECATED = (6, 15)


def key_of(arg: str) -> str:
    return arg.split("=", 1)[0]


def split_args(line: str) -> list[str]:
    return _TOKEN.findall(line)


def _removed(token: str, remove: list[str]) -> bool:
    return any(token == spec or ("=" not in spec and key_of(token) == spec) for spec in remove)


def edit_args(line: str, wanted: list[str], remove: list[str]) -> str:
    """Each wanted argument exactly once (a different value of its key is replaced in place),
    removed ones gone, all others untouched and in order."""
    wanted_by_key = {key_of(arg): arg for arg in wanted}
    result: list[str] = []
    placed: set[str] = set()
    for token in split_args(line):
        key = key_of(token)
        if key in wanted_by_key:
            if key not in placed:
                result.append(wanted_by_key[key])
                placed.add(key)
        elif not _removed(token, remove):
            result.append(token)
    result += [arg for arg in wanted if key_of(arg) not in placed]
    return " ".join(result)


def missing_args(line: str, wanted: list[str], remove: list[str]) -> list[str]:
    """What differs from the wish: wanted arguments absent, then removed ones present."""
    tokens = split_args(line)
    absent = [arg for arg in wanted if arg not in tokens]
    present = [f"-{t}" for t in tokens if _removed(t, remove)]
    return absent + present


def edit_grub_defaults(text: str, wanted: list[str], remove: list[str]) -> str:
    """/etc/default/grub with GRUB_CMDLINE_LINUX edited (added when the file has none)."""
    match = _GRUB_LINE.search(text)
    if match is None:
        separator = "" if text.endswith("\n") or not text else "\n"
        return f'{text}{separator}GRUB_CMDLINE_LINUX="{edit_args("", wanted, remove)}"\n'
    quote = match.group(2) or '"'
    value = edit_args(match.group(3), wanted, remove)
    return text[: match.start()] + f"{match.group(1)}{quote}{value}{quote}" + text[match.end() :]


def grub_cmdline(text: str) -> str | None:
    match = _GRUB_LINE.search(text)
    return match.group(3) if match else None


def edit_bls_entry(text: str, wanted: list[str], remove: list[str]) -> str:
    """A BLS entry with its `options` line edited (added when the entry has none)."""
    match = _OPTIONS_LINE.search(text)
    if match is None:
        separator = "" if text.endswith("\n") or not text else "\n"
        return f"{text}{separator}options {edit_args('', wanted, remove)}\n"
    value = edit_args(match.group(2), wanted, remove)
    return text[: match.start()] + match.group(1) + value + text[match.end() :]


def bls_options(text: str) -> str | None:
    match = _OPTIONS_LINE.search(text)
    return match.group(2) if match else None


def edit_kernel_cmdline(text: str, wanted: list[str], remove: list[str]) -> str:
    """/etc/kernel/cmdline: one line of arguments."""
    return edit_args(text.strip(), wanted, remove) + "\n"


def _version_key(version: str) -> list:
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", version)]


def default_entry(entries: dict[str, str], grubenv: str | None) -> str | None:
    """Path of the entry GRUB boots: grubenv's saved_entry if it exists, else the newest version."""
    if not entries:
        return None
    saved = re.search(r"^saved_entry=(\S+)", grubenv or "", re.MULTILINE)
    for path in entries:
        if saved and path.rsplit("/", 1)[-1] == f"{saved.group(1)}.conf":
            return path

    def version(path: str) -> list:
        match = _VERSION_LINE.search(entries[path])
        return _version_key(match.group(1) if match else path)

    return max(entries, key=version)


def _kernel_version(release: str | None) -> tuple[int, int] | None:
    """(major, minor) of a kernel release as `uname -r` or a BLS entry's `version` line gives
    it (`6.18.9-200.fc43.x86_64` is (6, 18)); None for anything else."""
    found = re.match(r"(\d+)\.(\d+)(?:\D|$)", release or "")
    return (int(found[1]), int(found[2])) if found else None


def _takes_gttsize(release: str | None) -> bool:
    """Whether a kernel of this release still sizes GTT by `amdgpu.gttsize` (before 6.15); an
    unknown release keeps it, as the config gives it."""
    version = _kernel_version(release)
    return version is None or version < GTTSIZE_DEPRECATED


def for_kernel(
    release: str | None, wanted: Iterable[str], remove: Iterable[str]
) -> tuple[list[str], list[str]]:
    """The arguments to add and to remove for a kernel of this release: where it no longer
    takes `amdgpu.gttsize`, the tool's gttsize is not added but removed (a value an earlier run
    wrote); `ttm.pages_limit`, beside it in `wanted`, stays."""
    wanted, remove = list(wanted), list(remove)
    if _takes_gttsize(release) or not any(key_of(arg) == GTTSIZE for arg in wanted):
        return wanted, remove
    return [arg for arg in wanted if key_of(arg) != GTTSIZE], [*remove, GTTSIZE]
