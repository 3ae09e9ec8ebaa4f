"""The cluster as `halo-cluster upgrade` and `rollback` reach it (`upgrade.Runner`): the nodes
over SSH as `status` reaches them (sshconfig.py, one shared connection per node), the deploy and
its dry run as `halo-cluster deploy` and `drift` run them, a /health poller on the head for the
downtime, and the head's history appended as the deploy appends it."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from halo_cluster.config import lock as locks
from halo_cluster.config.model import Cluster, Node
from halo_cluster.config.quoting import quote
from halo_cluster.config.rules import image_name
from halo_cluster.config.serving import api_key_read
from halo_cluster.node import progress
from halo_cluster.node.facts import as_user
from halo_cluster.node.image import (
    IMAGES_FORMAT,
    ResolvedImage,
    history_append,
    parse_images,
    versions_command,
)
from halo_cluster.tools import drift, sshconfig
from halo_cluster.tools.benchresults import GateResult, Side
from halo_cluster.tools.project import PYINFRA, Files
from halo_cluster.tools.upgrade import LocalImage, crash_looping, downtime

SERVICES = ("halo-ray", "halo-vllm")
PULL_SECONDS = 3600  # a multi-gigabyte image over a slow link
WATCH_SECONDS = 3  # vLLM's NRestarts read while the deploy runs
PROMPT = "The capital of France is"


class Remote:
    """One upgrade's reach: open with `with Remote(...) as remote:` (closes the connections)."""

    def __init__(self, cluster: Cluster, config: str, files: Files) -> None:
        self.cluster, self.config, self.files = cluster, config, files
        self.user = cluster.cluster_user
        self.by_name = {n.name: n for n in cluster.nodes}
        self.nodes = tuple(self.by_name)
        self.head = next(n for n in cluster.nodes if n.role == "head")
        self._folder = tempfile.TemporaryDirectory(prefix="halo-upgrade-")
        self.ssh_config = sshconfig.write(cluster, Path(self._folder.name))
        self._samples: list[tuple[float, int]] = []
        self.unreachable: dict[str, str] = {}  # node: why, from the dry run (`converged`)
        self._poller: subprocess.Popen | None = None

    def __enter__(self) -> Remote:
        return self

    def __exit__(self, *_: object) -> None:
        self._stop_poller()
        aliases = [sshconfig.alias(n) for n in self.cluster.nodes]
        subprocess.run(["ssh", "-F", str(self.ssh_config), "-O", "exit", *aliases],
                       capture_output=True)  # fmt: skip
        self._folder.cleanup()

    def run(self, node: Node, script: str, timeout: float = 120) -> tuple[int, str, str]:
        argv = ["ssh", "-F", str(self.ssh_config), sshconfig.alias(node), "sh", "-s"]
        try:
            done = subprocess.run(argv, input=script, capture_output=True, text=True,
                                  timeout=timeout)  # fmt: skip
        except subprocess.TimeoutExpired:
            return 124, "", f"no answer within {timeout:.0f} s"
        return done.returncode, done.stdout, done.stderr

    def _on_all(self, script_of, timeout: float = 120) -> dict[str, tuple[int, str, str]]:
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            found = pool.map(lambda n: self.run(n, script_of(n), timeout), self.cluster.nodes)
            return dict(zip(self.nodes, found, strict=True))

    def converged(self) -> str | None:
        summary = drift.run(self.config, self.files.entry)
        if summary["exit_code"] == drift.NO_DRIFT:
            return None
        print(drift.report(summary))
        self.unreachable = {
            n: e["reason"] for n, e in summary["nodes"].items() if e["status"] == drift.UNREACHABLE
        }
        if self.unreachable:
            down = ", ".join(self.unreachable)
            return f"{down} cannot be reached (above): nothing was changed"
        return f"a dry run is not converged (drift exit {summary['exit_code']}): deploy first"

    def resolve(self, reference: str) -> tuple[str | None, str]:
        fact = ResolvedImage()
        _, out, _ = self.run(self.head, fact.command(self.user, reference))
        found = fact.process(out.splitlines())
        return found.digest, found.error

    def pull(self, image: str) -> dict[str, tuple[float, str]]:
        def one(node: Node) -> tuple[float, str]:
            start = time.monotonic()
            pull = as_user(self.user, f"podman pull --quiet {shlex.quote(image)} >/dev/null")
            with progress.measuring(
                lambda line, _: print(f"{node.name}: {line}", flush=True),
                lambda script: self.run(node, script, progress.READ_SECONDS)[1],
                f"podman pull {image}",
                progress.pull_measure(self.user, image),
            ):
                code, _, err = self.run(node, pull, PULL_SECONDS)
            error = "" if code == 0 else (err.strip().splitlines() or [f"exit {code}"])[-1]
            return time.monotonic() - start, error

        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            return dict(zip(self.nodes, pool.map(one, self.cluster.nodes), strict=True))

    def versions(self, image: str) -> tuple[str, str]:
        _, out, _ = self.run(self.head, versions_command(self.user, image), 300)
        found = (out.strip().splitlines() or [""])[-1].split()
        return (found[0], found[1]) if len(found) == 2 else ("", "")

    def append(self, line: str) -> None:
        code, _, err = self.run(self.head, history_append(self.user, line))
        if code != 0:
            print(f"{self.head.name}: warning: history not written: {err.strip()[-200:]}")

    # P2
    def switch(self, pinned: str, stop_first: bool = False) -> str | None:
        """The deploy (its lock already says `pinned`), vLLM serving until it stops it just
        before Ray's restart on every node (`stop_first`: vLLM stopped before the deploy), then
        vLLM started and its /health wait; a crash-looping vLLM ends it at once."""
        self._start_poller()
        if stop_first:
            self.run(self.head, as_user(self.user, "systemctl --user stop halo-vllm"))
        env = dict(os.environ, CLUSTER_CONFIG=os.path.abspath(self.config))
        env[locks.UPGRADING] = "1"
        argv = [*PYINFRA, "-y", "inventory.py", "deploy.py"]
        deploy = subprocess.Popen(argv, cwd=self.files.entry, env=env, start_new_session=True)
        restarts: list[int] = []
        while deploy.poll() is None:
            time.sleep(WATCH_SECONDS)
            count = self._vllm_restarts()
            restarts += [count] if count is not None else []
            if crash_looping(restarts):
                os.killpg(deploy.pid, signal.SIGTERM)
                deploy.wait()
                return f"vLLM restarted {restarts[-1] - min(restarts)} times after the switch"
        if deploy.returncode != 0:
            return f"the deploy on {pinned} failed (pyinfra exit {deploy.returncode}; above)"
        return None

    def _vllm_restarts(self) -> int | None:
        show = as_user(self.user, "systemctl --user show -p NRestarts --value halo-vllm")
        code, out, _ = self.run(self.head, show, 20)
        text = out.strip()
        return int(text) if code == 0 and text.isdigit() else None

    def _start_poller(self) -> None:
        """A 1 s /health poller on the head, its answers timed here."""
        self._stop_poller()
        self._samples = []
        url = shlex.quote(f"{self.cluster.serve.head_url}/health")
        # bounded, and the shell's own echo: once this end closes, SIGPIPE ends the loop there
        bound = 2 * self.cluster.serve.ready_timeout + 600
        loop = (
            f"i=0; while [ $i -lt {bound} ]; do i=$((i + 1)); "
            f"code=$(curl -s -o /dev/null -m 1 -w '%{{http_code}}' {url}); "
            'echo "$code" || exit 0; sleep 1; done'
        )
        argv = ["ssh", "-F", str(self.ssh_config), sshconfig.alias(self.head), "sh", "-c",
                shlex.quote(loop)]  # fmt: skip
        self._poller = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read_poller, args=(self._poller,), daemon=True).start()

    def _read_poller(self, poller: subprocess.Popen) -> None:
        for line in poller.stdout or []:
            status = line.strip()
            self._samples.append((time.monotonic(), int(status) if status.isdigit() else 0))

    def _stop_poller(self) -> None:
        if self._poller is not None:
            self._poller.terminate()
            self._poller.wait()
            self._poller = None

    def downtime(self) -> float | None:
        time.sleep(2)  # the poller's next answers after the deploy's wait saw serving
        self._stop_poller()
        return downtime(list(self._samples))

    # P3
    def running_other(self, pinned: str) -> dict[str, str]:
        def inspect(node: Node) -> str:
            names = " ".join(SERVICES if node.role == "head" else SERVICES[:1])
            command = f"podman container inspect --format {shlex.quote(IMAGES_FORMAT)} {names}"
            return f"{as_user(self.user, command)} 2>/dev/null"

        other = {}
        for name, (_, out, _) in self._on_all(inspect).items():
            running = parse_images(out.splitlines())
            wanted = SERVICES if self.by_name[name].role == "head" else SERVICES[:1]
            for container in wanted:
                found = running.get(container, {}).get("reference", "no container")
                if found != pinned:
                    other.setdefault(name, f"{container} on {found}")
        return other

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
        code, out, err = self.run(self.head, as_user(self.user, f"sh -c {shlex.quote(ask)}"), 180)
        return completion_problem(code, out, err, model)

    # P4
    def local_images(self, node: str) -> list[LocalImage] | str:
        script = as_user(self.user, f"sh -c {shlex.quote(LIST_IMAGES)}")
        code, out, err = self.run(self.by_name[node], script)
        if code != 0:
            return (err.strip().splitlines() or [f"exit {code}"])[-1]
        return parse_local_images(out.splitlines(), image_name(self.cluster.container.reference))

    def remove_images(self, node: str, ids: list[str]) -> str:
        rmi = as_user(self.user, f"podman rmi {' '.join(shlex.quote(i) for i in ids)}")
        code, _, err = self.run(self.by_name[node], rmi)
        return "" if code == 0 else (err.strip().splitlines() or [f"exit {code}"])[-1]

    def bench_left(self) -> Side:
        """The bench gate's runs of the build that serves, before the switch (docs/bench.md)."""
        from halo_cluster.tools import benchgate

        return benchgate.runs(self.config, "old")

    def bench(self, left: Side | None, baseline: str) -> GateResult:
        """The bench gate's runs of the new build, compared with `left` (docs/bench.md)."""
        from halo_cluster.tools import benchgate

        return benchgate.gate(self.config, left, baseline)

    # R

    def states(self) -> dict[str, str]:
        def script(node: Node) -> str:
            units = " ".join(SERVICES if node.role == "head" else SERVICES[:1])
            return "\n".join(
                f"echo {u} $({as_user(self.user, f'systemctl --user is-active {u}')}) "
                f'"$({as_user(self.user, f"journalctl --user -u {u} -n 1 -q -o cat")})"'
                for u in units.split()
            )

        return {
            name: "; ".join(out.strip().splitlines()) or f"unreachable ({err.strip()[-100:]})"
            for name, (_, out, err) in self._on_all(script).items()
        }


# every image's id and the references it is known by, then each container's image id
LIST_IMAGES = (
    "ids=$(podman image ls --all --quiet --no-trunc); "
    '[ -z "$ids" ] || podman image inspect --format \'{{.Id}} {{join .RepoDigests " "}}\' $ids; '
    "echo @@used; podman ps --all --no-trunc --format '{{.ImageID}}'"
)


def parse_local_images(lines: list[str], name: str) -> list[LocalImage]:
    """LIST_IMAGES's output: the images known by a digest of `name`, and whether a container
    is made from each."""
    split = lines.index("@@used") if "@@used" in lines else len(lines)
    used = {line.strip().removeprefix("sha256:") for line in lines[split + 1 :] if line.strip()}
    found = []
    for line in lines[:split]:
        parts = line.split()
        if not parts:
            continue
        own = [r.partition("@")[2] for r in parts[1:] if r.partition("@")[0] == name]
        if own:
            image_id = parts[0].removeprefix("sha256:")
            found.append(LocalImage(image_id, tuple(own), image_id in used))
    return found


def completion_problem(code: int, out: str, err: str, model: str) -> str | None:
    """What is wrong with the completion curl printed (its body, then the HTTP status)."""
    if code != 0:
        return f"no answer ({(err.strip().splitlines() or [f'curl exit {code}'])[-1]})"
    body, _, status = out.rstrip("\n").rpartition("\n")
    if status != "200":
        return f"HTTP {status or 'none'}: {body.strip()[:200]}"
    try:
        answer = json.loads(body)
        text = answer["choices"][0]["text"]
    except (ValueError, KeyError, IndexError, TypeError):
        return f"not a completion: {body.strip()[:200]}"
    if not str(text).strip():
        return "an empty completion"
    if answer.get("model") != model:
        return f"answered by {quote(answer.get('model'))}, not {model}"
    return None
