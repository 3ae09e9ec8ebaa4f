"""The cluster user's subordinate ranges, judged before anything changes, on shadow-utils' own
test files (tests/plan/fixtures/SOURCES.md): an existing user without a range in /etc/subuid or
/etc/subgid refuses the node in one line with the fix; a new user gets its ranges from useradd;
ranges from an NSS module are not read; an SSSD or LDAP user is not created again."""

from __future__ import annotations

import logging

import pytest

from tests.plan.harness import plan
from tests.plan.nodes import cluster, fresh_node, refusal
from tests.recorded import fixture

PASSWD = fixture("shadow-04nss-passwd.txt")  # user1 (1001) and user2 (1002), regular users
SUBUID = fixture("shadow-04nss-subuid.txt")  # user2:300000:65536 ... conn:600000:65536
SUBGID = fixture("shadow-list-ranges-subgid.txt")  # nobody by name and by its uid 65534
NSS_PASSWD = "root:x:0:0:root:/root:/bin/bash\n"  # a node that knows user1 through SSSD only


@pytest.fixture
def log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="pyinfra")
    return caplog


def plan_user(user: str, **node) -> object:
    return plan(cluster(user=user), {"halo1": fresh_node(**node), "halo2": fresh_node()})


def test_an_existing_user_without_ranges_is_refused_with_the_usermod_fix() -> None:
    files = {"/etc/passwd": PASSWD, "/etc/subuid": SUBUID, "/etc/subgid": SUBGID}
    reason = refusal(plan_user("user1", files=files))
    assert reason == (
        "cluster_user user1 has no range in /etc/subuid nor /etc/subgid: rootless podman "
        "cannot pull the image; fix: `usermod --add-subuids 665536-731071 "
        "--add-subgids 511000-576535 user1`"
    )


def test_a_missing_file_is_created_before_usermod() -> None:
    """usermod refuses --add-subgids while /etc/subgid does not exist."""
    files = {"/etc/passwd": PASSWD, "/etc/subuid": SUBUID, "/etc/subgid": None}
    reason = refusal(plan_user("user2", files=files))
    assert reason.endswith("fix: `touch /etc/subgid && usermod --add-subgids 100000-165535 user2`")


def test_a_range_in_one_file_only_names_the_other() -> None:
    """user2 has a uid range (shadow's 04_nss subuid), no gid range."""
    files = {"/etc/passwd": PASSWD, "/etc/subuid": SUBUID, "/etc/subgid": SUBGID}
    reason = refusal(plan_user("user2", files=files))
    assert reason.startswith("cluster_user user2 has no range in /etc/subgid: rootless podman")
    assert reason.endswith("fix: `usermod --add-subgids 511000-576535 user2`")


def test_an_sssd_user_without_ranges_gets_the_lines_themselves() -> None:
    """NSS knows user1 (getent), /etc/passwd does not: usermod cannot edit it."""
    files = {"/etc/passwd": NSS_PASSWD, "/etc/subuid": SUBUID, "/etc/subgid": ""}
    account = [line for line in PASSWD.splitlines() if line.startswith("user1:")]
    reason = refusal(plan_user("user1", files=files, account=account))
    assert reason == (
        "cluster_user user1 (not in /etc/passwd: SSSD or LDAP, which useradd never saw) has no "
        "range in /etc/subuid nor /etc/subgid: rootless podman cannot pull the image; fix: "
        "`echo user1:665536:65536 >> /etc/subuid; echo user1:100000:65536 >> /etc/subgid` "
        "(or the ranges from SSSD: `subid: sss` in /etc/nsswitch.conf)"
    )


def test_an_sssd_user_with_ranges_is_not_created_again(log: pytest.LogCaptureFixture) -> None:
    """user2's uid range by name, a gid range by its uid: the deploy runs, adds it to the
    device groups with gpasswd and never runs useradd, which would fail on an NSS user."""
    files = {"/etc/passwd": NSS_PASSWD, "/etc/subuid": SUBUID, "/etc/subgid": "1002:700000:65536\n"}
    account = [line for line in PASSWD.splitlines() if line.startswith("user2:")]
    result = plan_user("user2", files=files, account=account)
    assert result.refused == {}
    commands = result.commands("halo1")
    assert not any(c.startswith("useradd") for c in commands)
    assert "gpasswd -a user2 render" in commands and "gpasswd -a user2 rdma" in commands
    assert "preflight subordinate ids: OK (user2: /etc/subuid 65536, /etc/subgid 65536 ids)" in (
        log.text
    )


def test_ranges_owned_by_the_uid_count() -> None:
    """shadow's list_ranges test: nobody's gid ranges are `nobody:200000:10000` and
    `65534:210000:10000` (its uid)."""
    from halo_cluster.roles.user.subids import ranges

    assert ranges(SUBGID, "nobody", 65534) == [(200000, 10000), (210000, 10000)]
    assert ranges(SUBGID, "nobody", None) == [(200000, 10000)]


def test_ranges_from_an_nss_module_are_not_verified(log: pytest.LogCaptureFixture) -> None:
    """`subid: zzz` (shadow's nsswitch3.conf): libsubid asks that module alone, not the files."""
    files = {
        "/etc/passwd": PASSWD,
        "/etc/subuid": SUBUID,
        "/etc/subgid": SUBGID,
        "/etc/nsswitch.conf": fixture("shadow-04nss-nsswitch3.conf"),
    }
    result = plan_user("user1", files=files)
    assert result.refused == {}
    assert (
        "preflight subordinate ids: NOT VERIFIED (/etc/nsswitch.conf takes the ranges from 'zzz' "
        "(subid:), which the deploy does not read: `getsubids user1` and `getsubids -g user1` "
        "on the node show them)"
    ) in log.text


def test_a_new_user_gets_its_ranges_from_useradd(log: pytest.LogCaptureFixture) -> None:
    result = plan_user("vllm")
    assert result.refused == {}
    assert any(c.startswith("useradd -m") for c in result.commands("halo1"))
    assert "preflight subordinate ids: OK (vllm is created by the deploy: useradd gives" in (
        log.text
    )


def test_a_new_user_without_the_files_is_warned_about(log: pytest.LogCaptureFixture) -> None:
    """useradd gives no ranges where /etc/subuid is missing (shadow's sub_uid_file_present)."""
    result = plan_user("vllm", files={"/etc/subuid": None, "/etc/subgid": None})
    assert result.refused == {}
    assert "preflight subordinate ids: WARN (vllm is created by the deploy, but /etc/subuid or" in (
        log.text
    )
