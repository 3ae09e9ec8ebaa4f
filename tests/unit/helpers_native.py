"""A 3-node cluster serving TP 1 x PP 3 with `serve.launcher: native` and what its head shows of
its world (vLLM's leader line, the master port's connections), shared by the status, verify and
upgrade tests of the native launcher; and a 2-node Ray cluster beside it."""

from __future__ import annotations

import yaml

from halo_cluster.config.loader import parse_cluster

NODES = (
    "nodes:\n"
    "  - {name: a, ssh: {host: h1}, data: {interface: eth1}}\n"
    "  - {name: b, ssh: {host: h2}, data: {interface: eth1}}\n"
)
NATIVE = parse_cluster(
    yaml.safe_load(
        "cluster_user: vllm\nsubnet: 192.168.100.0/29\nserve: {enabled: true, model: org/model, "
        "launcher: native, "
        "tensor_parallel_size: 1, pipeline_parallel_size: 3}\n"
        + NODES
        + "  - {name: c, ssh: {host: h3}, data: {interface: eth1}}\n"
    )
)
RAY = parse_cluster(
    yaml.safe_load("cluster_user: vllm\nserve: {enabled: true, model: org/model}\n" + NODES)
)
LEADER = (
    "(EngineCore_DP0 pid=212) INFO 12-02 14:01:07 [multiproc_executor.py:134] DP group leader: "
    "node_rank=0, node_rank_within_dp=0, master_addr=192.168.100.1, mq_connect_ip=192.168.100.1 "
    "(local), world_size=3, local_world_size=1\n"
)
# `ss -Htn state established 'sport = :29501'` on the head: its own worker and the two others
PEERS = (
    "0 0 192.168.100.1:29501 192.168.100.1:51234\n"
    "0 0 192.168.100.1:29501 192.168.100.2:40112\n"
    "0 0 192.168.100.1:29501 192.168.100.3:40998\n"
)
