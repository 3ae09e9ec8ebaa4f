"""Values refused by their own grammar before any host is contacted: image references by the
distribution spec, interface names by the kernel's `dev_valid_name`; messages name non-ASCII
characters by code point."""

from __future__ import annotations

from pathlib import Path

import pytest

from halo_cluster.config import rules
from tests.unit.configs import VALID_ROCE, problems

DIGEST = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    "image",
    [
        "docker.io/kyuz0/vllm-therock-gfx1151:latest",
        "localhost:5000/team/vllm_img:v1.2-rc",
        "registry.example:5000/a/b",
        f"docker.io/kyuz0/vllm@sha256:{DIGEST}",
        f"quay.io/a/b:v1@sha256:{DIGEST}",
        f"a/b@sha512:{DIGEST * 2}",
        "a" * 255,
    ],
)
def test_references_of_the_grammar_pass(image: str) -> None:
    assert rules.image_reference(image) is None


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ("docker.io/x/y:lätest", "only ASCII characters"),
        ("docker.io/x/y:\uff11", "only ASCII characters"),
        (f"a@sha256:{DIGEST[:32]}", "a sha256 digest is 64 lower-case hex digits"),
        (f"a@sha256:{DIGEST.upper()}", "a sha256 digest is 64 lower-case hex digits"),
        (f"a@md5:{DIGEST[:32]}", "unknown algorithm (known: sha256, sha512)"),
        ("a" * 256, "its name is longer than 255 characters"),
        ("a" * 300 + ":v1", "its name is longer than 255 characters"),
        ("a:", "a tag is"),
        ("a:" + "t" * 129, "a tag is"),
        ("Docker.io/X/y", "is not an image reference"),
        ("x; reboot", "is not an image reference"),
    ],
)
def test_references_beyond_the_grammar_are_refused(image: str, why: str) -> None:
    assert why in (rules.image_reference(image) or "")


def test_an_image_is_refused_by_the_loader(tmp_path: Path) -> None:
    found = problems(tmp_path, VALID_ROCE + f"image: 'a@sha256:{DIGEST.upper()}'\n")
    assert len(found) == 1 and ": image: " in found[0] and "lower-case hex" in found[0]


@pytest.mark.parametrize(
    "name", ["e;reboot", "e$(reboot)", "enp194s0np0", "thunderbolt0", "a" * 15, "e'x", "-"]
)
def test_names_the_kernel_takes_pass(name: str) -> None:
    # a name a shell would run passes: what is written where a shell reads it is quoted
    assert rules.interface_name(name) is None


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a" * 16, "абвгдежз", "e\u202ex", "e\x00", "a b", "a\tb", "a/b", "a:b", "é"],
)
def test_names_the_kernel_refuses_are_refused(name: str) -> None:
    assert "is not an interface name" in (rules.interface_name(name) or "")


def test_a_look_alike_is_named_by_code_point(tmp_path: Path) -> None:
    found = problems(
        tmp_path, VALID_ROCE + "serve: {enabled: true, model: 'Qw\u0435n/Qwen3 14B'}\n"
    )
    assert any("(U+0435 CYRILLIC SMALL LETTER IE at 3)" in line for line in found), found
