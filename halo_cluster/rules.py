"""What a valid value is, for the keys whose values reach a shell, a file name or the kernel.

Each rule takes the value and returns what is wrong with it, or None. The schema names a rule per
key; the loader applies it. Values that pass are safe to use as shell words (still quoted), file
names and kernel arguments: a hostile or impossible value never gets as far as a host.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Rule = Callable[[object], str | None]

# POSIX portable user names (useradd's default NAME_REGEX, without a trailing $)
USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
# podman/libpod's container name rule
CONTAINER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,252}")
# a host name, IPv4 or IPv6 address, as ssh takes it
SSH_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:%-]{0,252}")
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
MAC = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}")

# The OCI / distribution reference grammar: [domain/]path[:tag][@digest]
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(
    rf"(?:{_DOMAIN}/)?{_PATH_PART}(?:/{_PATH_PART})*(?::{_TAG})?(?:@{_DIGEST})?"
)

MACHINE_MEMORY_GIB = 128  # every Strix Halo board the guide covers
OS_RESERVE_GIB = 4  # what the OS keeps outside the GTT
MAX_GTT_GIB = MACHINE_MEMORY_GIB - OS_RESERVE_GIB


def _matches(pattern: re.Pattern[str], what: str) -> Rule:
    def rule(value: object) -> str | None:
        return None if pattern.fullmatch(str(value)) else f"{value!r} is not {what}"

    return rule


def _between(low: int, high: int, unit: str = "") -> Rule:
    def rule(value: object) -> str | None:
        ok = isinstance(value, int) and low <= value <= high
        return None if ok else f"{value} is outside {low}-{high}{unit}"

    return rule


def cluster_user(value: object) -> str | None:
    if value == "root":
        return "'root' is not allowed: the cluster runs as an unprivileged user"
    return user_name(value)


user_name = _matches(USER_NAME, "a POSIX user name ([a-z_][a-z0-9_-]*, at most 32)")
container_name = _matches(CONTAINER_NAME, "a container name ([a-zA-Z0-9][a-zA-Z0-9_.-]*)")
image_reference = _matches(IMAGE_REFERENCE, "an image reference ([registry/]name[:tag][@digest])")
ssh_host = _matches(SSH_HOST, "a host name or address")
node_name = _matches(NODE_NAME, "a node name (letters, digits, '.', '_', '-'; at most 63)")
mac_address = _matches(MAC, "a MAC address (aa:bb:cc:dd:ee:ff)")
port = _between(1, 65535)
reboot_timeout = _between(30, 86400, " seconds")
gtt_gib = _between(
    1,
    MAX_GTT_GIB,
    f" GiB: a {MACHINE_MEMORY_GIB} GiB machine keeps {OS_RESERVE_GIB} GiB for the OS",
)


MODEL_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
SAFE_PATH = re.compile(r"/[\w./+-]*")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# a bare flag, or --key=value; one argument without spaces, quotes or shell characters
SERVE_ARGUMENT = re.compile(r"[\w.,:/=+@%-]+")


def model(value: object) -> str | None:
    """A Hugging Face id (`org/name`) or an absolute path on the nodes."""
    text = str(value)
    if MODEL_ID.fullmatch(text) or (SAFE_PATH.fullmatch(text) and ".." not in text.split("/")):
        return None
    return f"{value!r} is not a Hugging Face id (org/name) or an absolute path on the nodes"


served_model_name = _matches(re.compile(r"[\w./:-]{1,128}"), "a model name (no spaces or quotes)")
ready_timeout = _between(10, 86400, " seconds")
positive = _between(1, 10**9)
serve_argument = _matches(SERVE_ARGUMENT, "a single vllm serve argument (no spaces or quotes)")


def gpu_memory_utilization(value: object) -> str | None:
    ok = isinstance(value, int | float) and 0 < value <= 0.95
    return None if ok else f"{value} is outside (0, 0.95]: 0.95 already runs out of memory here"


def environment(item: object) -> str | None:
    """One (name, value) of `serve.env`: a variable name and a one-line value."""
    name, value = item  # type: ignore[misc]
    if not ENV_NAME.fullmatch(name):
        return f"{name!r} is not an environment variable name"
    if "\n" in value or "\r" in value or "\0" in value:
        return f"the value of {name} spans lines"
    return None


def interface_name(value: object) -> str | None:
    text = str(value)
    if text in (".", "..") or not re.fullmatch(r"[^\s/:]{1,15}", text):
        return f"{value!r} is not an interface name (1-15 characters, no '/', ':' or spaces)"
    return None


def kernel_argument(value: object) -> str | None:
    text = str(value)
    if not text or text.startswith("=") or re.search(r"[\s\"'\\]", text):
        return f"{value!r} is not a single kernel argument (no spaces, quotes or backslashes)"
    return None
