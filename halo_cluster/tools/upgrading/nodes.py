"""`Nodes`, the cluster as both upgrades reach it for real (machine.Reach): the nodes over
tools/transport.py (one shared connection each), the deploy run as `halo-cluster deploy` runs it,
the head's history appended as the deploy appends it (node/image.py: `history_append`), the
/health wait and one completion; and the start-up both commands share."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from halo_cluster.config.model import Cluster, Node
from halo_cluster.config.serving import api_key_read, warmup_after_health, warmup_wait
from halo_cluster.node.facts import as_user
from halo_cluster.node.image import history_append
from halo_cluster.tools import project, selection, transport
from halo_cluster.tools.commands import found
from halo_cluster.tools.upgrading.machine import (
    PROMPT,
    STEP_SECONDS,
    completion_problem,
    deploy_argv,
    left_on,
)

READ_SECONDS = 120.0  # a read or a short command on a node
HEALTH_POLL = 1  # seconds between /health tries


class Nodes:
    """The cluster over `ssh` (opened by `connected`); `config` and `files`, the deploy's."""

    def __init__(
        self, cluster: Cluster, config: str, files: project.Files, ssh: transport.SshTransport
    ) -> None:
        self.cluster, self.config, self.files, self.ssh = cluster, config, files, ssh
        self.user = cluster.cluster_user
        self.head = cluster.head
        self.recorded: list[str] = []  # this run's history lines: what it did, if interrupted

    def close(self) -> None:
        """What the reach started and must end before the connections close."""

    def run(
        self, node: Node, what: str, script: str, timeout: float = STEP_SECONDS
    ) -> transport.Result:
        return self.ssh.run(node, script, timeout)

    def on_all(
        self, script_of: Callable[[Node], str], timeout: float = READ_SECONDS
    ) -> dict[str, transport.Result]:
        return self.ssh.on_all(script_of, timeout=timeout)

    def append(self, line: str) -> None:
        self.recorded.append(line)
        result = self.run(self.head, "history", history_append(self.user, line), READ_SECONDS)
        if not result.ok:
            print(f"{self.head.name}: warning: history not written: {result.error[-200:]}")

    def start_deploy(
        self, data: Sequence[str] = (), limit: Sequence[str] = (), watched: bool = False
    ) -> subprocess.Popen:
        """The deploy on this run's config; `watched`, in a session of its own, which the
        watcher may end as one (else it shares this terminal's Ctrl-C)."""
        env = dict(os.environ, CLUSTER_CONFIG=os.path.abspath(self.config))
        argv = deploy_argv(data, limit)
        return subprocess.Popen(argv, cwd=self.files.entry, env=env, start_new_session=watched)

    def deploy(self, data: Sequence[str] = (), limit: Sequence[str] = ()) -> int:
        return self.start_deploy(data, limit).wait()

    def health_url(self) -> str:
        return f"{self.cluster.serve.head_url}/health"

    def serving(self) -> bool:
        """/health answers 200 within serve.ready_timeout (always, with serving off); then the
        head's warm-up has ended (roles/serve/warmup.py: its end waited for, within its bound,
        never judged: its lines are in the history)."""
        if not self.cluster.settings["serve.enabled"]:
            return True
        bound = self.cluster.settings["serve.ready_timeout"]
        tries = max(1, int(bound / HEALTH_POLL))
        health = (
            f"for i in $(seq {tries}); do curl -sf -o /dev/null {shlex.quote(self.health_url())} "
            f"&& exit 0; sleep {HEALTH_POLL}; done; exit 1"
        )
        warm = warmup_after_health(1)  # the one served model
        warmed = as_user(self.user, f"sh -c {shlex.quote(warmup_wait(warm))}")
        script = f"sh -c {shlex.quote(health)} && {{ {warmed} || true; }}"
        return self.run(self.head, "serving", script, bound + warm + READ_SECONDS).ok

    def rejoin(self) -> str | None:
        """With `serve.launcher: native`, after one node's reboot: every rank stopped, then
        every rank started (its rank came back at boot alone, held out of the running world
        until every rank restarts: roles/serve/ranks.py); nothing with Ray, which rejoins.
        Which node's stop or start failed, or None."""
        if not self.cluster.settings["serve.enabled"] or self.cluster.serve.launcher != "native":
            return None
        for verb in ("stop", "start"):
            command = as_user(self.user, f"systemctl --user {verb} halo-vllm")
            results = self.on_all(lambda _, command=command: command, STEP_SECONDS)
            failed = [name for name, result in results.items() if not result.ok]
            if failed:
                return f"the {verb} of every rank failed on {', '.join(failed)}"
        return None

    def completion(self) -> str | None:
        """One completion with the configured model, the API key on curl's stdin."""
        serve = self.cluster.serve
        model = serve.served_model_name
        body = json.dumps({"model": model, "prompt": PROMPT, "max_tokens": 8, "temperature": 0})
        url = f"{serve.head_url}/v1/completions"
        ask = (
            api_key_read('"$HOME"') + 'printf "Authorization: Bearer %s\\n" "$key" | '
            f"curl -s -m 120 -w '\\n%{{http_code}}' -H @- -H 'Content-Type: application/json' "
            f"-d {shlex.quote(body)} {shlex.quote(url)}"
        )
        script = as_user(self.user, f"sh -c {shlex.quote(ask)}")
        return completion_problem(self.run(self.head, "completion", script, 180), model)


N = TypeVar("N", bound=Nodes)


@contextlib.contextmanager
def connected(
    prog: str, cluster: Cluster, config: str, files: project.Files, kind: type[N]
) -> Iterator[N]:
    """A `kind` of `Nodes` over the cluster's own connections, closed at the end; a Ctrl-C
    first says, under PROG, what the run left on each node (`machine.left_on`)."""
    with transport.connected(cluster) as ssh:
        nodes = kind(cluster, config, files, ssh)
        try:
            yield nodes
        except KeyboardInterrupt:
            print(f"{prog}: what this run left on each node, by the last step it recorded "
                  f"(the head's history holds every step):", file=sys.stderr)  # fmt: skip
            for line in left_on([n.name for n in cluster.nodes], nodes.recorded):
                print(line, file=sys.stderr)
            raise
        finally:
            nodes.close()


def start(command: str) -> tuple[Cluster, project.Files] | None:
    """The config (its problems said) and the deploy's files (where they were looked for
    said), or None: the command then exits REFUSED."""
    cluster = project.load_or_say(project.config())
    if cluster is None:
        return None
    files = found.files(command)
    return (cluster, files) if files is not None else None


def chosen(prog: str, cluster: Cluster, args: argparse.Namespace) -> list[Node] | None:
    """The nodes `--limit`/`--exclude` leave, or None once the refusal is said."""
    try:
        return selection.select(cluster, args.limit, args.exclude)
    except selection.Refused as refused:
        print(f"{prog}: {refused}", file=sys.stderr)
        return None
