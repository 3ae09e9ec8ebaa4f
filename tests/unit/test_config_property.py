"""Property: any document, built from the schema or mutated from cluster.example.yml, is either
accepted or refused with one line per problem naming the file and a key (or a YAML position);
never a traceback, never more than 2 s. And for the kernel and network keys, what an accepted
document gives: kernel arguments that never contradict the tool's, interface names the kernel
takes."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from halo_cluster import roles
from halo_cluster.config import rpmversion
from halo_cluster.config.loader import ConfigError, load_cluster
from halo_cluster.config.schema import REQUIRED
from halo_cluster.roles.os import versions
from halo_cluster.tools import options
from halo_cluster.tools.upgrading import kernels

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = roles.schema()
EXAMPLE = (ROOT / "cluster.example.yml").read_text()
FOLDER = Path(tempfile.mkdtemp(prefix="halo-property-"))
SETTINGS = settings(
    max_examples=int(__import__("os").environ.get("HALO_EXAMPLES", "60")),
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# values a user might write, right or wrong: near the bounds, YAML 1.1 words, hostile text
TEXT = st.one_of(
    st.sampled_from(
        [
            "",
            "vllm",
            "no",
            "off",
            "auto",
            "lo",
            "thunderbolt0",
            "enp194s0np0",
            "Qwen/Qwen3-14B",
            "Qwen/../x",
            "/srv/models/m",
            "10.0.0.11",
            "10.0.0.11:2222",
            "fe80::1",
            "192.168.100.0/30",
            "0.0.0.0/0",
            "aa:bb:cc:dd:ee:01",
            "01:00:5e:00:00:01",
            "--host=0.0.0.0",
            "-tp",
            "LD_PRELOAD",
            "a\nb",
            "$(touch /tmp/x)",
            "x" * 5000,
        ]
    ),
    st.text(max_size=40),
)
SCALAR = st.one_of(
    TEXT,
    st.integers(min_value=-(10**12), max_value=10**12),
    st.sampled_from([0, 1, 22, 1023, 6379, 8000, 65535, 65536, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
ANY = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)


# a valid value for the keys without which nothing is derived
GOOD = {"cluster_user": "vllm", "nodes[].name": "halo1", "nodes[].ssh.host": "10.0.0.11"}


def value_for(type_name: str, prefix: str) -> st.SearchStrategy[Any]:
    """A value of the field's type most of the time (so the rules and the derivation are
    reached), one of its choices when it has some, anything else sometimes."""
    field = SCHEMA.by_path.get(prefix)
    if field and field.choices:
        return st.one_of(st.sampled_from(field.choices), st.sampled_from(field.choices), ANY)
    if prefix in GOOD:
        return st.one_of(st.just(GOOD[prefix]), st.just(GOOD[prefix]), TEXT)
    typed = {
        "string": TEXT,
        "integer": st.one_of(
            st.sampled_from([0, 1, 2, 22, 75, 1024, 6379, 8000, 65536, 10**9]), st.integers()
        ),
        "number": st.floats(allow_nan=True, allow_infinity=True),
        "boolean": st.booleans(),
        "list of strings": st.lists(TEXT, max_size=3),
        "list of integers": st.lists(st.integers(), max_size=4),
        "map of strings": st.dictionaries(TEXT, TEXT, max_size=3),
        "mapping": mapping_for(prefix),
        "list of mappings": st.lists(mapping_for(prefix + "[]"), min_size=0, max_size=4),
    }[type_name]
    return st.one_of(typed, typed, typed, ANY)


def mapping_for(prefix: str) -> st.SearchStrategy[dict]:
    fields = SCHEMA.children_of(prefix)
    if not fields:
        return st.just({})
    strategies = {
        key: mapping_for(f.path) if f.type == "mapping" else value_for(f.type, f.path)
        for key, f in fields.items()
    }
    required = {key for key, f in fields.items() if f.default is REQUIRED}
    return st.deferred(
        lambda: st.fixed_dictionaries(
            {key: strategies[key] for key in required},
            optional={key: s for key, s in strategies.items() if key not in required},
        )
    )


def check(text: str | bytes) -> None:
    path = FOLDER / "cluster.yml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    try:
        load_cluster(path)
    except ConfigError as error:
        assert error.problems
        for line in error.problems:
            assert "\n" not in line and line.startswith(f"{path}: "), line
            assert len(line) < 600, line
            assert line.removeprefix(f"{path}: ").strip(), line  # a key or position, and what


@SETTINGS
@given(mapping_for(""))
def test_documents_built_from_the_schema(doc: dict) -> None:
    check(yaml.safe_dump(doc, allow_unicode=True))


def example_lines() -> list[str]:
    return EXAMPLE.splitlines()


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=len(example_lines()) - 1),
            st.sampled_from(["replace value", "delete", "duplicate", "insert", "indent"]),
            TEXT,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_mutations_of_the_example(mutations: list[tuple[int, str, str]]) -> None:
    lines = example_lines()
    for index, how, text in mutations:
        index %= len(lines)
        line = lines[index]
        if how == "replace value" and ":" in line:
            key = line.split(":", 1)[0]
            lines[index] = f"{key}: {text}"
        elif how == "delete":
            del lines[index]
        elif how == "duplicate":
            lines.insert(index, line)
        elif how == "insert":
            lines.insert(index, text)
        elif how == "indent":
            lines[index] = "  " + line
        if not lines:
            lines = [""]
    check("\n".join(lines) + "\n")


@SETTINGS
@given(st.binary(max_size=200))
def test_arbitrary_bytes(data: bytes) -> None:
    check(data)


def test_every_schema_type_has_a_strategy() -> None:
    for field in SCHEMA.fields:
        assert value_for(field.type, field.path) is not None


# kernel arguments a user might write: the tool's own by name (with and without a value, with '-'
# for '_'), the same name twice, ordinary ones, and anything
ARGUMENT = st.one_of(
    st.sampled_from(
        [
            "quiet",
            "rhgb",
            "foo=1",
            "foo=2",
            "foo",
            "amd_pstate=active",
            "iommu=pt",
            "iommu",
            "amd_iommu=on",
            "pci=noaer",
            "pcie_aspm",
            "amdgpu.gttsize=4",
            "amdgpu.gttsize",
            "ttm.pages_limit=1024",
            "ttm.pages-limit=1024",
            "pcie-aspm=force",
            "foo-bar",
            "foo_bar=1",
            "=x",
            "a b",
        ]
    ),
    st.text(max_size=12),
)
KERNEL = st.fixed_dictionaries(
    {},
    optional={
        "extra_args": st.lists(ARGUMENT, max_size=4),
        "remove_args": st.lists(ARGUMENT, max_size=3),
        "iommu": st.sampled_from(["pt", "off"]),
        "pci_realloc": st.booleans(),
        "pcie_aspm_off": st.booleans(),
        "gtt_gib": st.integers(min_value=-1, max_value=130),
    },
)
INTERFACE = st.one_of(
    st.sampled_from(
        ["e;reboot", "e$(reboot)", "a" * 15, "a" * 16, ".", "..", "абвгдежз", "e\u202e"]
    ),
    st.text(max_size=20),
)
NETWORK_NODES = "  - {name: halo1, ssh: {host: 10.0.0.11}, data: {interface: %s}}\n"


def accepted(text: str):
    """The cluster a document gives, or None when it is refused (as `check` requires: one line
    per problem)."""
    try:
        check(text)
        return load_cluster(FOLDER / "cluster.yml")
    except ConfigError:
        return None


@SETTINGS
@given(KERNEL)
def test_kernel_arguments_never_contradict_the_tools(section: dict) -> None:
    """Accepted: each argument name once, none the tool owns given again, nothing removed that
    is added, by name as the kernel reads them."""
    from halo_cluster.roles.kernel.schema import owned, param_name

    doc = {"cluster_user": "vllm", "nodes": [{"name": "a", "ssh": {"host": "10.0.0.11"}}]}
    cluster = accepted(yaml.safe_dump({**doc, "kernel": section}, allow_unicode=True))
    if cluster is None:
        return
    names = [param_name(arg) for arg in cluster.kernel.args]
    assert len(names) == len(set(names)), cluster.kernel.args
    for arg in (*section.get("extra_args", []), *section.get("remove_args", [])):
        assert param_name(arg) not in owned(), arg
    assert not {param_name(arg) for arg in section.get("remove_args", [])} & set(names)


@SETTINGS
@given(INTERFACE, st.sampled_from([9000, 9000, 1279, 1280, 9216, 9217]))
def test_an_accepted_interface_name_is_one_the_kernel_takes(name: str, mtu: int) -> None:
    doc = f"cluster_user: vllm\nmtu: {mtu}\nnodes:\n" + NETWORK_NODES % json.dumps(name)
    cluster = accepted(doc)
    if cluster is None:
        return
    assert 1280 <= mtu <= 9216  # roce
    interface = cluster.nodes[0].interface
    if interface == "auto":
        return
    raw = interface.encode()
    assert 1 <= len(raw) <= 15 and interface.isascii() and interface.isprintable()
    assert not any(c in interface for c in "/: \t") and interface not in (".", "..")


# rpm's version grammar (config/rpmversion.py): what might be typed for --kernel, --firmware or
# in os.known_versions; its own shapes, digits of other scripts, arches, anything
NON_ASCII_DIGIT = st.characters(categories=["Nd"]).filter(lambda c: not c.isascii())
VERSION_TEXT = st.one_of(
    st.from_regex(rpmversion.EVR, fullmatch=True),
    st.text(
        alphabet=st.one_of(st.sampled_from("0123456789.-:_+~^%{}ax "), NON_ASCII_DIGIT),
        max_size=30,
    ),
    st.sampled_from(
        ["6.18.9-200.fc43", "6.18.9-200.fc43.x86_64", "1" * 200, "\u0661:6.18.3-200.fc43"]
    ),
    st.text(max_size=30),
)
KNOWN_BOUNDS = ("6.18.4", "1:6.18.9-200.fc43", "6.18.9-200.fc43", "0:0", "~rc1^-1")


@SETTINGS
@given(VERSION_TEXT)
def test_an_accepted_version_is_ascii_and_rpm_compares_it(text: str) -> None:
    """Accepted (as an EVR, or as a bound without its release): ASCII, at most 128 characters,
    and (epoch, version, release) rpm's comparison orders against any other without error,
    antisymmetrically; a target it refuses is one line naming the option."""
    if rpmversion.problem(text) is None:
        assert rpmversion.problem(text, release=False) is None
    refused = options.problem("--kernel", text, rule=kernels.target_rule("--kernel"))
    if rpmversion.problem(text, release=False) is not None:
        with pytest.raises(ValueError):
            rpmversion.split(text)
        assert refused is not None and refused.startswith("--kernel: ") and "\n" not in refused
        return
    assert text.isascii() and len(text) <= rpmversion.MAX_LENGTH
    epoch, version, release = rpmversion.split(text)
    assert epoch >= 0 and version and release != ""
    for other in (*KNOWN_BOUNDS, text):
        order = versions.compare_evr(text, other)
        assert order in (-1, 0, 1) and versions.compare_evr(other, text) == -order
    assert versions.compare_evr(text, text) == 0


@SETTINGS
@given(
    st.text(alphabet=st.sampled_from("0123456789.-:"), max_size=20),
    st.integers(min_value=0, max_value=20),
    NON_ASCII_DIGIT,
)
def test_a_version_with_a_digit_of_another_script_is_refused(
    base: str, at: int, digit: str
) -> None:
    text = base[:at] + digit + base[at:]
    assert rpmversion.problem(text) is not None
    assert rpmversion.problem(text, release=False) is not None
    assert kernels.target_rule("--firmware")(text) is not None
    assert versions.version_problem(f"< {text}") is not None
    with pytest.raises(ValueError):
        rpmversion.split(text)


@SETTINGS
@given(st.lists(VERSION_TEXT, max_size=3), st.sampled_from(["kernel-core", "amd-gpu-firmware"]))
def test_a_known_versions_entry_loads_with_rpm_s_versions_or_is_refused_in_one_line(
    specs: list[str], package: str
) -> None:
    entry = {
        "package": package,
        "versions": specs,
        "verdict": "bad",
        "symptom": "hangs",
        "source": "ours",
        "date": "2026-11-30",
    }
    doc = {"cluster_user": "vllm", "nodes": [{"name": "a", "ssh": {"host": "10.0.0.11"}}]}
    cluster = accepted(yaml.safe_dump({**doc, "os": {"known_versions": [entry]}}))
    if cluster is None:
        return
    mine = cluster.os.known_versions[0]
    assert mine["versions"] and all(versions.version_problem(v) is None for v in mine["versions"])
    for spec in mine["versions"]:
        assert spec.isascii() and len(spec) <= rpmversion.MAX_LENGTH + 3
        if " " not in spec:  # an exact version: the entry of yours decides it
            assert cluster.os.judged(package, spec).verdict == "bad"
