"""The recorded nodes and the clusters the plan tests share: a fresh Fedora 43 Strix Halo as
recorded, the same node converged, with its cluster user, image or services."""

from __future__ import annotations

import json
import re
import secrets
import tempfile
from pathlib import Path

import yaml
from pyinfra.facts.rpm import RpmPackages

from halo_cluster import roles
from halo_cluster.config.loader import parse_cluster
from halo_cluster.config.schema import use
from halo_cluster.decide.safety import E810_DEVICES, INTEL_VENDOR
from halo_cluster.node import toolbox
from halo_cluster.node.facts import (
    DataPortHardware,
    Hardware,
    NetworkInterfaces,
    SshSessionInterfaces,
    TextFiles,
)
from halo_cluster.node.firewalldfact import Firewalld
from halo_cluster.node.image import ContainerImages, HeadHistory, ResolvedImage
from halo_cluster.node.memory import ModelWeights, NodeMemory
from halo_cluster.node.versions import InstalledVersions
from halo_cluster.roles import all_packages
from halo_cluster.roles.metrics.facts import Units
from halo_cluster.roles.network.facts import NmActiveConnections, NmProfiles
from halo_cluster.roles.serve import watchdog
from halo_cluster.roles.serve.controller import make_token
from halo_cluster.roles.serve.facts import (
    DepartedServices,
    HttpStatus,
    ModelConfig,
    ModelFiles,
    RdmaLinks,
    UserManager,
    UserUnits,
)
from halo_cluster.roles.user.facts import UserAccount
from tests.plan.harness import Node, Plan, given, plan
from tests.recorded import (
    firewalld_output,
    fixture,
    interfaces_output,
    skopeo_digest,
    strix_halo_versions,
    text_files_output,
    versions_output,
)

# the digest the head's skopeo resolves cluster.yml's image to (recorded skopeo output)
RESOLVED = skopeo_digest()
PINNED = f"docker.io/kyuz0/vllm-therock-gfx1151@{RESOLVED}"

use(roles.schema())  # the plan harness loads configs as inventory.py does

GRUB = "/etc/default/grub"

ENTRY_F35 = "/boot/loader/entries/62a337f0-5.16.5-200.fc35.x86_64.conf"

ENTRY_RHEL = "/boot/loader/entries/45701212-6.12.0-55.40.1.el10_0.x86_64.conf"

KEYFILE = "/etc/NetworkManager/system-connections/halo-data.nmconnection"

FLOW_CONTROL = "/etc/NetworkManager/dispatcher.d/90-halo-flow-control.sh"

# The E810-CQDA1 port of the recorded Fedora 43 Strix Halo (ethtool -i enp194s0np0), PCI id
# 8086:1592 as recorded by lspci for the E810-C QSFP.
E810 = {
    "name": "enp194s0np0",
    "mac": "6c:fe:54:00:00:01",
    "vendor": "0x8086",
    "device": "0x1592",
    "driver": "ice",
}

MGMT = {
    "name": "eno1",
    "mac": "9c:6b:00:00:00:01",
    "vendor": "0x10ec",
    "device": "0x8125",
    "driver": "r8169",
    "addresses": ["10.0.0.11/24"],
}

LOOPBACK = {"name": "lo", "mac": "00:00:00:00:00:00", "addresses": ["127.0.0.1/8"]}

RPMS = [
    line.rsplit(".", 1)[0]
    for line in fixture("uname-and-rpm-kernel-fedora43.txt").splitlines()
    if line.startswith("kernel")
]


def rpm_lines(names: list[str]) -> list[str]:
    return [re.sub(r"^(.+)-([^-]+-[^-]+)$", r"\1 \2", nevr) for nevr in names]


def cluster(
    extra: str = "", interconnect: str = "roce", data: str = "{interface: auto}", user: str = "vllm"
):
    import yaml

    text = (
        f"interconnect: {interconnect}\ncluster_user: {user}\n{extra}"
        f"nodes:\n  - {{name: halo1, ssh: {{host: 10.0.0.11}}, data: {data}}}\n"
        f"  - {{name: halo2, ssh: {{host: 10.0.0.12}}, data: {data}}}\n"
    )
    return parse_cluster(yaml.safe_load(text))


# `ethtool -a` of an ice port as it comes (flow control off), and with it applied (DAC link)
PAUSE_OFF = "ethtool-a-include-statistics-ice-pause-off.txt"
PAUSE_ON = "ethtool-a-ice-dac-25g-pause-on.txt"


def strix_halo_hardware(
    rdma: str = "irdma1", infiniband: bool = True, pause: str | None = PAUSE_OFF
) -> list[str]:
    """The Hardware fact's output on a Strix Halo with an E810, from recorded outputs; `pause`:
    the recorded `ethtool -a` of its port (None: a port without pause support)."""
    model = fixture("cpuinfo-model-name-strix-halo.txt").split(":", 1)[1].strip()
    vram = fixture("sysfs-mem_info-gtt-vram-strix-halo-nixos-uma512m-annotated.txt")
    vram_bytes = vram.split("mem_info_vram_total")[1].split()[0]
    ethtool = fixture("ethtool-i-e810-fedora43-strix-halo.txt").splitlines()
    return [
        "virt none",
        f"cpu  {model}",
        f"vram {vram_bytes}",
        *[f"ethtool {line}" for line in ethtool],
        *[f"pause {line}" for line in (fixture(pause).splitlines() if pause else [])],
        f"rdma {rdma}",
        # its PCI function as systemd's name enp194s0np0 gives it (bus 0xc2, slot 0, one
        # function), its irdma device a CA over Ethernet (RoCE v2, as its recorded ibv_devinfo
        # GIDs): not recorded, the one read that has no recording
        "pci 0000:c2:00.0 ari=0 header=00 vf=0 onboard= node=1 link=Ethernet",
        "module ice",
        "module irdma",
        *(["infiniband"] if infiniband else []),
    ]


# `rdma link` recorded on an E810 (legacy names): irdma0/1 DOWN/DISABLED, irdma1/1 ACTIVE/LINK_UP
RDMA_LINKS = fixture("rdma-link-irdma-legacy-names.txt").splitlines()

# A fresh install: root and the system groups that own the GPU and RDMA devices, no cluster user.
PASSWD = "root:x:0:0:Super User:/root:/bin/bash\n"

GROUP = "root:x:0:\nwheel:x:10:\nvideo:x:39:\nrender:x:105:\nrdma:x:106:\n"
# Fedora's `setup` package ships both files empty; useradd then gives a new user its ranges,
# and the existing cluster user of these nodes has them as the lab's (lab/rootfs.py)
NO_SUBIDS = {"/etc/subuid": "", "/etc/subgid": ""}
VLLM_SUBIDS = {"/etc/subuid": "vllm:100000:65536\n", "/etc/subgid": "vllm:100000:65536\n"}


def fresh_node(**over) -> Node:
    """A fresh Fedora 43 install as recorded: boot files, rpm list, NIC, os-release.

    `files` adds or replaces files ({path: text or (text, mode)}) in the TextFiles fact; a path
    given None is left out."""
    boot = over.pop(
        "boot",
        {
            GRUB: fixture("etc-default-grub-rocky-cat.txt"),
            "/proc/cmdline": fixture("proc-cmdline-fedora43.txt"),
            ENTRY_F35: fixture("bls-entry-fedora35-workstation.conf"),
            ENTRY_RHEL: fixture("bls-entry-rhel10.conf"),
        },
    )
    files = {
        "/etc/os-release": fixture("os-release-fedora43-workstation.txt"),
        "/etc/passwd": PASSWD,
        "/etc/group": GROUP,
        **NO_SUBIDS,
        **boot,
        **over.pop("files", {}),
    }
    files = {path: text for path, text in files.items() if text is not None}
    interfaces = over.pop("interfaces", [LOOPBACK, MGMT, E810])
    hardware = over.pop("hardware", strix_halo_hardware())
    e810 = [
        i["name"]
        for i in interfaces
        if i.get("vendor") == INTEL_VENDOR and i.get("device") in E810_DEVICES
    ]

    def data_port(mac: str | None) -> list[str]:
        """DataPortHardware: the one port of this MAC, or `auto`'s one E810 port."""
        ports = [i["name"] for i in interfaces if i["mac"] == mac.lower()] if mac else e810
        return [f"port {ports[0] if len(ports) == 1 else 'none'}", *hardware]

    # the memory budget's lines, as `make status` reads both facts in one command: each fact
    # reads its own of them
    memory = over.pop("memory", [])
    responses: Node = {
        TextFiles: text_files_output(files),
        NetworkInterfaces: interfaces_output(interfaces),
        SshSessionInterfaces: over.pop("sessions", ["10.0.0.11 eno1"]),
        NmActiveConnections: over.pop("active", ["eno1:eno1"]),
        NmProfiles: over.pop("profiles", []),
        RpmPackages: rpm_lines(over.pop("rpms", RPMS)),
        # the os role's: a Strix Halo on a known-good kernel and firmware (tests/recorded.py)
        InstalledVersions: over.pop("versions", None) or versions_output(*strix_halo_versions()),
        DataPortHardware: data_port,
        Hardware: hardware,  # of the interface the config names, and of each one the node has
        **{
            given(Hardware, interface=n): hardware for n in [None, *(i["name"] for i in interfaces)]
        },
        NodeMemory: memory,
        ModelWeights: memory,
        # the serve role's: the model's snapshot (none on a fresh node), its units, /health
        ModelFiles: over.pop("model", []),
        # the head's read of the model's config.json before any download (none: not estimated)
        ModelConfig: over.pop("model_config", []),
        UserUnits: over.pop("units", []),
        # the user role's: the cluster user as NSS sees it (none: not SSSD's or LDAP's)
        UserAccount: over.pop("account", []),
        UserManager: over.pop("manager", []),
        HttpStatus: over.pop("health", []),
        # the head's probe of the nodes that left the cluster (no answer: unreachable)
        DepartedServices: over.pop("departed", []),
        # which image our containers run (none on a fresh node)
        ContainerImages: over.pop("images", []),
        # the head's resolve of the image, while no lock records a digest
        ResolvedImage: over.pop("resolved", [RESOLVED]),
        # the head's history of the image (none on a fresh node)
        HeadHistory: over.pop("history", []),
        Firewalld: over.pop("firewall", None) or firewalld_output(),
        # RdmaLinks (serve.transport: rdma): recorded, irdma1 ACTIVE (the Hardware fact's device)
        RdmaLinks: over.pop("rdma_links", RDMA_LINKS),
        # the metrics role's: node_exporter's and Prometheus' units (none on a fresh node)
        Units: over.pop("metrics_units", []),
    }
    assert not over, over
    return responses


def plan_both(c, node=None, **over) -> Plan:
    return plan(c, {"halo1": node or fresh_node(**over), "halo2": fresh_node()})


OUR_PACKAGES = all_packages()


def plan_by_mac() -> Plan:
    """Two nodes whose data ports are named by MAC; halo2's port carries its MAC."""
    c = parse_cluster(
        yaml.safe_load(
            "cluster_user: vllm\nnodes:\n"
            '  - {name: halo1, ssh: {host: 10.0.0.11}, data: {mac: "6c:fe:54:00:00:01"}}\n'
            '  - {name: halo2, ssh: {host: 10.0.0.12}, data: {mac: "6c:fe:54:00:00:02"}}\n'
        )
    )
    other = dict(E810, mac="6c:fe:54:00:00:02")
    return plan(c, {"halo1": fresh_node(), "halo2": fresh_node(interfaces=[LOOPBACK, MGMT, other])})


def converged_node(
    mtu: int = 9000, firewall: list[str] | None = None, pause: str | None = PAUSE_ON
) -> Node:
    """halo1 as the first run leaves it: files in place, packages in, link up, flow control on
    (`pause`: the port's recorded `ethtool -a`)."""
    uploads = plan_both(cluster()).uploads("halo1")
    boot = {
        path: text
        for path, text in uploads.items()
        if path.startswith(("/etc/default", "/boot", "/etc/kernel"))
    }
    boot["/proc/cmdline"] = "BOOT_IMAGE=(hd0,gpt2)/vmlinuz " + uploads["/etc/kernel/cmdline"]
    link = dict(E810, mtu=mtu, addresses=["192.168.100.1/30"])
    return fresh_node(
        boot=boot,
        files={KEYFILE: (uploads[KEYFILE], "600"), FLOW_CONTROL: (uploads[FLOW_CONTROL], "755")},
        rpms=RPMS + [f"{p}-1.0-1.fc43" for p in OUR_PACKAGES],
        active=["eno1:eno1", "halo-data:enp194s0np0"],
        interfaces=[LOOPBACK, MGMT, link],
        firewall=firewall or firewalld_output(trusted={"interfaces": "enp194s0np0"}),
        hardware=strix_halo_hardware(pause=pause),
    )


def refusal(result: Plan, node: str = "halo1") -> str:
    """The refusal's reason; a refused node has no operation at all."""
    assert result.names(node) == [], result.names(node)
    return result.refused[node]


HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHxWorkerHostKeyRecordedForThePlanTest"

IMAGE_ID = "0d2ad943cb929ab12d29ea11c9618c3c2edca5ebba9a9c9ec62d1bda36e496ca"


def node(user_files: dict[str, str] | None = None, **facts) -> Node:
    """A fresh node with an SSH host key; `user_files` ({path below ~vllm: text}) also creates
    the cluster user."""
    files = {"/etc/ssh/ssh_host_ed25519_key.pub": f"{HOST_KEY} root@worker\n"}
    if user_files is not None:
        files["/etc/passwd"] = PASSWD + "vllm:x:1000:1000::/home/vllm:/bin/bash\n"
        files.update(VLLM_SUBIDS)
        files.update({f"/home/vllm/{path}": text for path, text in user_files.items()})
    hardware = facts.pop("hardware", strix_halo_hardware())
    return fresh_node(hardware=hardware, files=files, **facts)


def plan_pair(extra: str = "", interconnect: str = "roce", head=None, worker=None):
    data = "{interface: auto}" if interconnect == "roce" else "{}"
    tb = {"name": "thunderbolt0", "mac": "02:a1:59:56:2c:c2", "driver": "thunderbolt-net"}
    interfaces = (
        {}
        if interconnect == "roce"
        else {
            "interfaces": [
                {"name": "lo", "mac": "00:00:00:00:00:00"},
                {"name": "eno1", "mac": "9c:6b:00:00:00:01", "addresses": ["10.0.0.11/24"]},
                tb,
            ]
        }
    )
    return plan(
        cluster(extra, interconnect=interconnect, data=data),
        {"halo1": head or node(**interfaces), "halo2": worker or node(**interfaces)},
    )


STORAGE = ".local/share/containers/storage"


def containers(image: str | None, made_from: str | None, options: list[str]) -> dict[str, str]:
    """The cluster user's podman storage index and our toolbox record, as files."""
    images = [
        {
            "id": image,
            "names": ["docker.io/kyuz0/vllm-therock-gfx1151:latest"],
            "digest": RESOLVED,  # the cluster's digest (the head's recorded resolve)
        }
    ]
    boxes = [{"id": "65cff7ffff31", "names": ["vllm-therock-gfx1151"], "image": made_from}]
    files = {
        f"{STORAGE}/overlay-images/images.json": json.dumps(images if image else []),
        f"{STORAGE}/overlay-containers/containers.json": json.dumps(boxes if made_from else []),
    }
    if made_from:
        files[toolbox.state_file("vllm-therock-gfx1151")] = toolbox.record(made_from, options)
    return files


HOME = "/home/vllm"

CONFIG = f"{HOME}/.config/halo-cluster"

SERVE = "serve: {enabled: true, model: Qwen/Qwen3-14B, max_model_len: 8192%s}\n"

TB = {"name": "thunderbolt0", "mac": "02:a1:59:56:2c:c2", "driver": "thunderbolt-net"}

PLAIN_MGMT = {"name": "eno1", "mac": "9c:6b:00:00:00:01", "addresses": ["10.0.0.11/24"]}

PLAIN_LO = {"name": "lo", "mac": "00:00:00:00:00:00"}

# beside a cluster.yml: the Ray token made once, the same for every plan of this module
SHARED_DIR = Path(tempfile.mkdtemp(prefix="halo-plan-"))


def serve_cluster(
    nodes: int = 2,
    interconnect: str = "roce",
    serve: str = "",
    tmp_path=None,
    top: str = "",
    model: str = "Qwen/Qwen3-14B",
    max_model_len: int = 8192,
):
    data = "{interface: auto}" if interconnect == "roce" else "{}"
    section = (SERVE % serve).replace("Qwen/Qwen3-14B", model)
    section = section.replace("max_model_len: 8192", f"max_model_len: {max_model_len}")
    lines = [f"interconnect: {interconnect}", "cluster_user: vllm", top + section]
    if nodes > 2:
        lines.append("subnet: 192.168.100.0/29")
    lines.append("nodes:")
    lines += [
        f"  - {{name: halo{i}, ssh: {{host: 10.0.0.{10 + i}}}, data: {data}}}"
        for i in range(1, nodes + 1)
    ]
    base_dir = tmp_path or SHARED_DIR
    cluster = parse_cluster(yaml.safe_load("\n".join(lines)), base_dir=base_dir)
    token = Path(cluster.serve.ray_token_file)
    if not token.exists():  # as the first deploy makes it, the same for every plan of the folder
        make_token(token, secrets.token_hex(32) + "\n")
    return cluster


def user_node(
    infiniband: bool = True, interconnect: str = "roce", rdma: str = "irdma1", **over
) -> Node:
    """A node whose cluster user exists (the services live in its home); `rdma`: the data
    port's RDMA device in sysfs."""
    files = {
        "/etc/passwd": PASSWD + f"vllm:x:1000:1000::{HOME}:/bin/bash\n",
        **VLLM_SUBIDS,
        **over.pop("files", {}),
    }
    hardware = over.pop("hardware", strix_halo_hardware(rdma=rdma, infiniband=infiniband))
    if interconnect == "thunderbolt":
        over.setdefault("interfaces", [PLAIN_LO, PLAIN_MGMT, TB])
    return fresh_node(hardware=hardware, files=files, **over)


def plan_cluster(cluster, **node) -> Plan:
    return plan(cluster, {n.name: user_node(**node) for n in cluster.nodes})


SNAPSHOT = f"{HOME}/.cache/huggingface/hub/models--Qwen--Qwen3-14B/snapshots/{'a' * 40}"
# the model's files on a node that has it (ModelFiles' output)
MODEL_FILES = [f"dir {SNAPSHOT}", "728 config.json", "3700000000 model-00001-of-00004.safetensors"]


def watchdog_running(files: dict, units: list[str]) -> None:
    """The head's stall watchdog as a first deploy leaves it: enabled (`systemctl --user
    enable`'s link) and running."""
    unit = files.get(f"{HOME}/{watchdog.UNIT}")
    if unit:
        files[f"{HOME}/{watchdog.WANTS}"] = unit
    units += ["", "Id=halo-watchdog.service", "ActiveState=active"]


def converged(
    cluster, name: str, active: bool = True, health: str = "200", rdma: str = "irdma1"
) -> Node:
    """A node as a first deploy leaves it: every service file in place, the services running
    (`rdma`: its data port's RDMA device, as user_node)."""
    first = plan_cluster(cluster).uploads(name)
    files = {
        path: (
            text,
            "600"
            if path.endswith(("secrets.env", "ray-token", "serve.env", "hf-token"))
            else "755"
            if path.endswith(".sh")
            else "644",
        )
        for path, text in first.items()
        if path.startswith(HOME)
    }
    units = ["Id=halo-ray.service", "ActiveState=active", "", "Id=halo-vllm.service"]
    units.append("ActiveState=active" if active else "ActiveState=failed")
    watchdog_running(files, units)
    return user_node(files=files, units=units, health=[health], model=MODEL_FILES, rdma=rdma)


def native_node(cluster, name: str, vllm: str = "active", health: str = "200", **over) -> Node:
    """A node as a first `serve.launcher: native` deploy leaves it: its rank's files in place,
    no Ray running, its rank `vllm` (the head's watchdog running)."""
    first = plan_cluster(cluster).uploads(name)
    files = {
        path: (text, "600" if path.endswith(("secrets.env", "serve.env")) else "644")
        for path, text in first.items()
        if path.startswith(HOME)
    }
    files = {p: (t, "755" if p.endswith(".sh") else m) for p, (t, m) in files.items()}
    units = ["Id=halo-ray.service", "ActiveState=inactive", "", "Id=halo-vllm.service"]
    units.append(f"ActiveState={vllm}")
    watchdog_running(files, units)
    return user_node(files=files, units=units, health=[health], model=MODEL_FILES, **over)
