"""Where the serving cluster is, from its config alone: `halo-cluster where`, the end of
`make demo SERVE=1`.

Three lines: vLLM's URL, one curl line that works from this machine, and the status command for
this config. With `listen: data` vLLM answers on the head's data address only, which this
machine may not reach (the lab's data link is between its nodes): the curl line then runs on the
head over the config's own SSH settings. The API key is read from `serve.api_key_file` by the
shell running the line and fed to curl on its standard input (`-H @-`): it is never printed and
never in a command line.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from halo_cluster.config.model import Cluster, Node
from halo_cluster.tools import project


def shown(path: str) -> str:
    """A path as the user would type it here: relative when under the current directory."""
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else path


def url(cluster: Cluster) -> str:
    """vLLM's URL from here (the serve role's derivation: the head's SSH host with `all`)."""
    return cluster.serve.url


def dquote(text: str) -> str:
    """`text` in double quotes for a POSIX shell (readable where single quotes nest)."""
    return '"' + "".join("\\" + c if c in '\\"$`' else c for c in text) + '"'


def ssh_prefix(node: Node) -> str:
    argv = ["ssh"]
    if node.ssh_key:
        argv += ["-i", shown(node.ssh_key)]
    if node.ssh_known_hosts:
        argv += ["-o", f"UserKnownHostsFile={shown(node.ssh_known_hosts)}"]
    if node.ssh_port != 22:
        argv += ["-p", str(node.ssh_port)]
    return shlex.join([*argv, f"{node.ssh_user}@{node.ssh_host}"])


def curl_line(cluster: Cluster) -> str:
    serve = cluster.serve
    body = {"model": serve.served_model_name, "prompt": "Hello", "max_tokens": 16}
    headers = "-H 'Content-Type: application/json'" + (" -H @-" if serve.api_key_file else "")
    curl = f"curl -s {url(cluster)}/v1/completions {headers} -d {shlex.quote(json.dumps(body))}"
    if serve.listen == "data":
        curl = f"{ssh_prefix(cluster.head)} {dquote(curl)}"
    if not serve.api_key_file:
        return curl
    key = shlex.quote(shown(serve.api_key_file))
    return f"printf 'Authorization: Bearer %s\\n' \"$(cat {key})\" | {curl}"


def status_command(config: str | Path) -> str:
    """`halo-cluster status` for this config (the default config needs no option)."""
    if Path(config).resolve() == project.default_config().resolve():
        return "halo-cluster status"
    return f"halo-cluster status --config {shlex.quote(shown(str(config)))}"


def document(cluster: Cluster, config: str | Path) -> dict:
    """The same as `lines`, for `where --json`: from the config alone (no node is asked)."""
    serve = cluster.serve
    if not serve.enabled:
        none = dict.fromkeys(("model", "url", "listen", "try", "status"))
        return {"serving": False, "reason": lines(cluster, config)[0], "head": cluster.head.name,
                **none}  # fmt: skip
    return {
        "serving": True,
        "reason": None,
        "model": serve.served_model_name,
        "url": url(cluster),
        "listen": serve.listen,
        "head": cluster.head.name,
        "try": curl_line(cluster),
        "status": status_command(config),
    }


def lines(cluster: Cluster, config: str | Path) -> list[str]:
    serve = cluster.serve
    if not serve.enabled:
        return [f"not serving: serve.enabled is false in {cluster.source}"]
    side = "the head's data address" if serve.listen == "data" else "every address of the head"
    return [
        f"serving {serve.served_model_name} at {url(cluster)} ({side}, node {cluster.head.name})",
        f"try it:  {curl_line(cluster)}",
        f"status:  {status_command(config)}",
    ]
