"""What a valid value is, for the keys whose values reach a shell, a file name or the kernel.

Each rule takes the value and returns what is wrong with it, or None. The schema names a rule per
key; the loader applies it. Values that pass are safe to use as shell words (still quoted), file
names and kernel arguments: a hostile or impossible value never gets as far as a host.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

from halo_cluster.config import serving
from halo_cluster.config.quoting import quote

Rule = Callable[[object], str | None]

# POSIX portable user names (useradd's default NAME_REGEX, without a trailing $)
USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
# podman/libpod's container name rule
CONTAINER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,252}")
# a host name, IPv4 or IPv6 address, as ssh takes it
SSH_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:%-]{0,252}")
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
MAC = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}")

# The distribution spec's reference grammar (distribution/reference): [domain/]path[:tag][@digest],
# ASCII only; the name (domain and path) at most 255 characters; a digest by the OCI image spec's
# registered algorithms, lower-case hex of their length
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_NAME = re.compile(rf"(?:{_DOMAIN}/)?{_PATH_PART}(?:/{_PATH_PART})*", re.ASCII)
IMAGE_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", re.ASCII)
IMAGE_DIGESTS = {"sha256": 64, "sha512": 128}
IMAGE_NAME_MAX = 255

MACHINE_MEMORY_GIB = 128  # every Strix Halo board the guide covers
OS_RESERVE_GIB = 4  # what the OS keeps outside the GTT
MAX_GTT_GIB = MACHINE_MEMORY_GIB - OS_RESERVE_GIB


def _matches(pattern: re.Pattern[str], what: str) -> Rule:
    def rule(value: object) -> str | None:
        ok = isinstance(value, str) and pattern.fullmatch(value)
        return None if ok else f"{quote(value)} is not {what}"

    return rule


def between(low: int, high: int, unit: str = "") -> Rule:
    def rule(value: object) -> str | None:
        ok = isinstance(value, int) and low <= value <= high
        return None if ok else f"{quote(value)} is outside {low}-{high}{unit}"

    return rule


# accounts Fedora, systemd and common packages create below UID 1000 (and nobody, 65534): their
# home is / or /nonexistent and their shell nologin; the cluster user gets groups and lingering
SYSTEM_USERS = frozenset(
    {
        "root", "bin", "daemon", "adm", "lp", "sync", "shutdown", "halt", "mail", "operator",
        "games", "ftp", "nobody", "dbus", "polkitd", "sshd", "chrony", "systemd-network",
        "systemd-resolve", "systemd-timesync", "systemd-oom", "systemd-coredump", "tss",
        "rpc", "rpcuser", "avahi", "colord", "geoclue", "rtkit", "pipewire", "unbound",
        "dnsmasq", "usbmuxd", "gdm", "sddm", "setroubleshoot", "saslauth", "abrt", "qemu",
        "libstoragemgmt", "nm-openconnect", "nm-openvpn", "openvpn", "radvd", "tcpdump",
        "apache", "nginx", "postfix", "ntp", "named", "mysql", "postgres", "sys", "man",
        "news", "uucp", "proxy", "www-data", "backup", "list", "irc", "gnats", "_apt",
        "messagebus", "systemd-journal", "flatpak", "gluster", "cockpit-ws", "cockpit-wsinstance",
    }
)  # fmt: skip


def cluster_user(value: object) -> str | None:
    if value == "root":
        return "'root' is not allowed: the cluster runs as an unprivileged user"
    if value in SYSTEM_USERS:
        return (
            f"{quote(value)} is a system account (no home, no login shell): choose a regular "
            "login user, or a new name the deploy creates"
        )
    return user_name(value)


user_name = _matches(USER_NAME, "a POSIX user name ([a-z_][a-z0-9_-]*, at most 32)")
container_name = _matches(CONTAINER_NAME, "a container name ([a-zA-Z0-9][a-zA-Z0-9_.-]*)")
_ssh_host_name = _matches(SSH_HOST, "a host name or address")
node_name = _matches(NODE_NAME, "a node name (letters, digits, '.', '_', '-'; at most 63)")
_mac_text = _matches(MAC, "a MAC address (aa:bb:cc:dd:ee:ff)")
port = between(1, 65535)
reboot_timeout = between(30, 86400, " seconds")
gtt_gib = between(
    1,
    MAX_GTT_GIB,
    f" GiB: a {MACHINE_MEMORY_GIB} GiB machine keeps {OS_RESERVE_GIB} GiB for the OS",
)


# The hub's own repo id rule (huggingface_hub validate_repo_id): namespace/name of [A-Za-z0-9_.-],
# each starting and ending with a letter, digit or '_', the name at most 96, no '--' or '..', no
# '.git' at the end; this tool also requires the namespace (`org/name`).
_HUB_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
MODEL_ID = re.compile(rf"{_HUB_PART}/{_HUB_PART}")
SAFE_PATH = re.compile(r"(?:/[A-Za-z0-9_.+-]+)+")
# the container's own folders: a model mounted over them replaces the system or the tool's files
SYSTEM_PATHS = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys",
    "/usr", "/var", "/tmp",
)  # fmt: skip
MAX_PATH = 4096  # PATH_MAX
# a bare flag, or --key=value; one argument without spaces, quotes or shell characters
SERVE_ARGUMENT = re.compile(r"[\w.,:/=+@%-]+", re.ASCII)
MAX_ARGUMENT = 4096


def model(value: object) -> str | None:
    """A Hugging Face id (`org/name`) or an absolute path on the nodes."""
    text = str(value)
    if text.startswith("/"):
        return _model_path(text)
    if MODEL_ID.fullmatch(text) and ".." not in text and "--" not in text:
        return None if not text.endswith(".git") else f"{quote(text)} ends in .git"
    return (
        f"{quote(text)} is not a Hugging Face id (org/name: letters, digits, '_', '.', '-'; "
        "no '..' or '--') or an absolute path on the nodes"
    )


def _model_path(text: str) -> str | None:
    if len(text) > MAX_PATH or not SAFE_PATH.fullmatch(text):
        return (
            f"{quote(text)} is not an absolute path of letters, digits and '_.+-' "
            "(no '//' or trailing '/')"
        )
    if any(part in (".", "..") for part in text.split("/")):
        return f"{quote(text)} has a '.' or '..' segment: give the folder itself"
    if any(text == root or text.startswith(root + "/") for root in SYSTEM_PATHS):
        return f"{quote(text)} is a system folder of the container: keep models elsewhere"
    return None


served_model_name = _matches(
    re.compile(r"[\w./:-]{1,128}", re.ASCII), "a model name (no spaces or quotes)"
)
ready_timeout = between(10, 86400, " seconds")
positive = between(1, 10**9)
object_store_mib = between(
    serving.OBJECT_STORE_MIN_MIB,
    serving.OBJECT_STORE_MAX_MIB,
    f" MiB: Ray's minimum is {serving.OBJECT_STORE_MIN_MIB} MiB, and more than half of a "
    f"{MACHINE_MEMORY_GIB} GiB node takes the memory the model needs",
)


def serve_port(value: object) -> str | None:
    """vLLM's port: unprivileged, and none that SSH or Ray already holds."""
    low = serving.FIRST_UNPRIVILEGED_PORT
    if not isinstance(value, int) or not low <= value <= 65535:
        return f"{quote(value)} is outside {low}-65535 (below {low} needs root)"
    problem = serving.pinned_port(value)
    return f"{value} {problem}: choose another port" if problem else None


def serve_argument(value: object) -> str | None:
    """One word of `vllm serve`'s arguments (the serve role's rule adds the flags it owns)."""
    text = str(value)
    if len(text) > MAX_ARGUMENT or not SERVE_ARGUMENT.fullmatch(text):
        return f"{quote(text)} is not a single vllm serve argument (no spaces or quotes)"
    return None


def gpu_memory_utilization(value: object) -> str | None:
    ok = isinstance(value, int | float) and 0 < value <= 0.95
    return None if ok else f"{quote(value)} is outside (0, 0.95]: 0.95 already runs out of memory"


def environment(item: object) -> str | None:
    """One (name, value) of `serve.env`: a variable name and a one-line value."""
    name, value = item  # type: ignore[misc]
    if not serving.ENV_NAME.fullmatch(name):
        return f"{quote(name)} is not an environment variable name ([A-Z_][A-Z0-9_]*)"
    if pinned := serving.pinned_variable(name):
        return f"{name} is set by the tool: {pinned}"
    if len(value) > MAX_ARGUMENT or not value.isprintable():
        return f"the value of {name} is not one line of printable text ({quote(value)})"
    return None


def image_name(reference: str) -> str:
    """The reference's name without its tag and digest: what `NAME@sha256:...` is made of."""
    rest = reference.partition("@")[0]
    name, colon, tag = rest.rpartition(":")
    return rest if not colon or "/" in tag else name


def image_digest(reference: str) -> str | None:
    """The digest a `name@sha256:...` reference pins, None for a tag."""
    return reference.partition("@")[2] or None


def image_reference(value: object) -> str | None:
    """An image reference as the distribution spec's grammar has it, refused here rather than by
    `podman pull` on every node."""
    text = str(value)
    what = "is not an image reference ([registry/]name[:tag][@sha256:digest])"
    if not text.isascii():
        return f"{quote(text)} {what}: only ASCII characters"
    rest, at, digest = text.partition("@")
    name, colon, tag = rest.rpartition(":")
    if not colon or "/" in tag:  # no tag: a ':' before the last '/' is the registry's port
        name, tag = rest, None
    if not IMAGE_NAME.fullmatch(name):
        return f"{quote(text)} {what}"
    if len(name) > IMAGE_NAME_MAX:
        return f"{quote(text)} {what}: its name is longer than {IMAGE_NAME_MAX} characters"
    if tag is not None and not IMAGE_TAG.fullmatch(tag):
        return f"{quote(text)} {what}: a tag is [A-Za-z0-9_][A-Za-z0-9_.-]*, at most 128"
    return _digest_problem(text, digest) if at else None


def image_digest_problem(digest: str) -> str | None:
    """A digest alone (`sha256:...`), as the lock records the cluster's: the OCI rule above."""
    return _digest_problem(digest, digest)


def _digest_problem(text: str, digest: str) -> str | None:
    algorithm, _, hexes = digest.partition(":")
    length = IMAGE_DIGESTS.get(algorithm)
    if length is None:
        known = ", ".join(IMAGE_DIGESTS)
        return f"{quote(text)} has a digest of an unknown algorithm (known: {known})"
    if not re.fullmatch(rf"[0-9a-f]{{{length}}}", hexes, re.ASCII):
        return f"{quote(text)}: a {algorithm} digest is {length} lower-case hex digits"
    return None


# the kernel's own rule (net/core/dev.c, dev_valid_name): 1-15 bytes (IFNAMSIZ 16 with its NUL),
# no '/', ':' or white space, not '.' or '..'; and ASCII printable, so bytes are characters
INTERFACE_NAME = re.compile(r"[!-~]{1,15}", re.ASCII)


def interface_name(value: object) -> str | None:
    text = str(value)
    if text in (".", "..") or not INTERFACE_NAME.fullmatch(text) or re.search(r"[/:]", text):
        return (
            f"{quote(text)} is not an interface name (1-15 ASCII letters, digits or punctuation; "
            "no '/', ':' or spaces; not '.' or '..')"
        )
    if text == "lo":
        return "'lo' is the loopback interface: name the port of the data link"
    return None


def kernel_argument(value: object) -> str | None:
    """One token of the kernel command line. /etc/default/grub, where it is written inside
    GRUB_CMDLINE_LINUX="...", is a shell script grub2-mkconfig sources as root: a '$' or '`'
    there would run, so neither is taken (nor anything unprintable)."""
    text = str(value)
    if not text or text.startswith("=") or re.search(r"[\s\"'\\$`]", text):
        return (
            f"{quote(text)} is not a single kernel argument (no spaces, quotes, backslashes, "
            "'$' or '`')"
        )
    if not text.isprintable():
        return f"{quote(text)} is not a single kernel argument (printable characters only)"
    return None


def line(limit: int, least: int = 0) -> Rule:
    """One printable line of LEAST to LIMIT characters: free text shown inside a refusal's line
    (a known version's symptom, a gate's reason in the lock), where a line break would forge a
    line of its own and ESC would reach the terminal."""

    def problem(value: object) -> str | None:
        if not isinstance(value, str) or not value.isprintable():
            return (
                f"{quote(value)} is not one line of printable text (no line breaks or control "
                "characters: write it on one line)"
            )
        if len(value) > limit:
            return f"{quote(value)} is longer than {limit} characters (say it in one line)"
        if len(value) < least:
            return f"{quote(value)} is empty (say it in one line)"
        return None

    return problem


def file_path(value: object) -> str | None:
    """A file on the controller: a path the OS can take (no NUL, at most PATH_MAX)."""
    text = str(value)
    if len(text) > MAX_PATH or not text.isprintable():
        return f"{quote(text)} is not a file path (printable, at most {MAX_PATH} characters)"
    return None


def mac_address(value: object) -> str | None:
    """Six hex pairs of a unicast, non-zero address: a profile bound to a multicast or zero MAC
    matches no port."""
    if problem := _mac_text(value):
        return problem
    octets = [int(part, 16) for part in str(value).split(":")]
    if octets[0] & 1:
        return f"{quote(value)} is a multicast address (odd first octet): give the port's MAC"
    if not any(octets):
        return f"{quote(value)} is the all-zero address: give the port's MAC"
    return None


def ssh_host(value: object) -> str | None:
    """A host name or an IPv4/IPv6 address as ssh takes it; `host:port` is a mistake."""
    text = str(value)
    if re.fullmatch(r"\[?[^\]]*\]?:[0-9]+", text) and (text.count(":") == 1 or "]" in text):
        return f"{quote(text)} has a port: give the host alone and the port in ssh.port"
    if problem := _ssh_host_name(text):
        return problem
    if ":" in text:
        try:
            ipaddress.IPv6Address(text)
        except ValueError:
            return f"{quote(text)} is not an IPv6 address"
    elif re.fullmatch(r"[0-9.]+", text):
        try:
            ipaddress.IPv4Address(text)
        except ValueError:
            return f"{quote(text)} is not an IPv4 address"
    return None


def normal_host(text: str) -> str:
    """One spelling per machine: lower case, no trailing dot, an address in its canonical form
    (IPv6 compressed, zone kept)."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text.lower().rstrip(".")
