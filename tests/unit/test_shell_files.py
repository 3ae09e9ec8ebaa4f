"""Every value written into a file a shell reads is quoted for that shell, whatever the value:
the launcher's cluster.env (which /etc/profile.d/halo-cluster.sh sources in every login shell,
root's included) and every `*.sh`. The files are rendered with hostile values and really sourced
or run by dash (/bin/sh) and bash: nothing they hold runs, and each variable or argument holds
the exact value. podman's env files (serve.env, secrets.env: quadlet's `EnvironmentFile=`) are
no shell: podman takes a value literally to the end of its line, so there a value is written as
it is, and one with a line break is refused."""

from __future__ import annotations

import ast
import subprocess
import time
from pathlib import Path

import jinja2
import pytest
from jinja2 import nodes

import halo_cluster.templates
from halo_cluster import roles
from halo_cluster.config.serving import NODE_PORTS, PORTS
from halo_cluster.node.environment import roce_nccl
from halo_cluster.node.render import FILTERS, environment, templates
from halo_cluster.node.render import folder as folder_of

SHELLS = ("/bin/sh", "/bin/bash")
# what a config or a node might hold, were the rules not there: each must arrive as it is
HOSTILE = (
    ";touch {mark}",
    "$(touch {mark})",
    "`touch {mark}`",
    "a'b\"c\\d $HOME *",
    "x\ntouch {mark}",
    "-e",
    "",
)
# a value of a comment or of podman's files may not hold a line break: refused, never written
ONE_LINE_HOSTILE = tuple(value for value in HOSTILE if "\n" not in value)
ENV_NAMES = (
    "VLLM_HEAD_IP",
    "VLLM_WORKER_IP",
    "VLLM_REMOTE_TOOLBOX",
    "VLLM_HOST_IP",
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "VLLM_ROCE_HCA",
    "NCCL_IB_HCA",
)


def all_templates() -> list[tuple[str, str, str]]:
    """(role, template, source) of every role's templates."""
    found = []
    top = Path(next(iter(halo_cluster.templates.__path__)))
    for role in roles.all_roles():
        folder = top / folder_of(role.__name__)
        for path in sorted(folder.glob("*.j2")) if folder.is_dir() else ():
            found.append((role.__name__, path.name, path.read_text()))
    return found


def read_by(template: str) -> str | None:
    """Who reads the rendered file: a shell, podman's env-file parser, or neither here."""
    target = template.removesuffix(".j2")
    if target.endswith(".sh") or target == "cluster.env":
        return "shell"
    if target.endswith(".env"):
        return "podman"
    return None


def heredoc_lines(source: str) -> set[int]:
    """Line numbers inside a quoted here-document (`<<'PY'`): Python, not shell."""
    inside, found = False, set()
    for number, line in enumerate(source.splitlines(), 1):
        if inside and line.strip() == "PY":
            inside = False
        elif inside:
            found.add(number)
        elif "<<'PY'" in line:
            inside = True
    return found


def unquoted_outputs(source: str, reader: str) -> list[str]:
    """The values a template writes without its reader's filter: `sh` or `integer` for a shell
    (`tojson` inside a Python here-document, `oneline` in a comment), `oneline` or `integer` for
    podman's files."""
    lines = source.splitlines()
    python = heredoc_lines(source)
    wrong = []
    for output in environment(jinja2.DictLoader({})).parse(source).find_all(nodes.Output):
        for expr in output.nodes:
            if isinstance(expr, nodes.TemplateData):
                continue
            line = lines[expr.lineno - 1]
            allowed = {"integer"}
            if reader == "podman" or line.lstrip().startswith("#"):
                allowed.add("oneline")
            if reader == "shell":
                allowed.add("tojson" if expr.lineno in python else "sh")
            if not (isinstance(expr, nodes.Filter) and expr.name in allowed):
                wrong.append(f"line {expr.lineno}: {line.strip()}")
    return wrong


SHELL_READ = [(r, t, s) for r, t, s in all_templates() if read_by(t)]


def test_the_files_a_shell_reads_are_found() -> None:
    names = {t for _, t, _ in SHELL_READ}
    assert {"cluster.env.j2", "halo-cluster.sh.j2", "ray-start.sh.j2", "vllm-start.sh.j2"} <= names
    assert {"serve.env.j2", "secrets.env.j2"} <= names


@pytest.mark.parametrize(("role", "template", "source"), SHELL_READ, ids=lambda x: str(x)[:30])
def test_every_value_goes_through_its_readers_filter(role: str, template: str, source: str):
    assert unquoted_outputs(source, read_by(template) or "") == [], template


def test_a_value_without_its_filter_is_found() -> None:
    assert unquoted_outputs("A={{ x }}\nB={{ x | sh }}\n", "shell") == ["line 1: A={{ x }}"]
    assert unquoted_outputs("# {{ x | oneline }}\nA={{ x | oneline }}\n", "shell") == [
        "line 2: A={{ x | oneline }}"
    ]
    assert unquoted_outputs("A={{ x | sh }}\n", "podman") == ["line 1: A={{ x | sh }}"]
    assert set(FILTERS) == {"sh", "oneline", "integer"}


def marked(value: str, mark: Path) -> str:
    return value.format(mark=mark)


def cluster_env(value: str, comment: str) -> str:
    return templates("roles.launcher")(
        "cluster.env.j2",
        node=comment,
        role=comment,
        head_ip=value,
        worker_ips=[value, value],
        toolbox=value,
        node_ip=value,
        interface=value,
        interconnect="roce",
        hca=value,
        roce_nccl=roce_nccl(value),
    )


def source_profile(shell: str, env_file: Path, tmp_path: Path) -> list[str]:
    """What a login shell gets from /etc/profile.d/halo-cluster.sh, as rendered, sourcing
    `env_file` in place of /etc/halo-cluster/cluster.env: each variable, NUL-terminated."""
    profile = templates("roles.launcher")("halo-cluster.sh.j2")
    assert "/etc/halo-cluster/cluster.env" in profile
    script = tmp_path / "profile.sh"
    script.write_text(profile.replace("/etc/halo-cluster/cluster.env", str(env_file)))
    printed = " ".join(f'"${name}"' for name in ENV_NAMES)
    done = subprocess.run(
        [shell, "-c", f'. "$1" && printf "%s\\0" {printed}', "sh", str(script)],
        capture_output=True,
        timeout=10,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().split("\0")[:-1]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("hostile", range(len(HOSTILE)))
def test_cluster_env_sourced_by_profile_runs_nothing(
    shell: str, hostile: int, tmp_path: Path
) -> None:
    mark = tmp_path / "ran"
    value = marked(HOSTILE[hostile], mark)
    comment = marked(ONE_LINE_HOSTILE[hostile % len(ONE_LINE_HOSTILE)], mark)
    env_file = tmp_path / "cluster.env"
    env_file.write_text(cluster_env(value, comment))
    got = source_profile(shell, env_file, tmp_path)
    assert not mark.exists(), env_file.read_text()
    hca = [value, value] if value else ["", ""]  # the pin in both; no RDMA device: neither line
    assert got == [value, f"{value},{value}", value, value, value, value, *hca]


def test_a_line_break_never_reaches_a_comment_or_podmans_files() -> None:
    with pytest.raises(ValueError, match="holds a line break"):
        cluster_env("ok", "halo1\ntouch /tmp/x")
    render = templates("roles.serve")
    with pytest.raises(ValueError, match="holds a line break"):
        render("secrets.env.j2", api_key="sk\nLD_PRELOAD=/tmp/x.so")
    with pytest.raises(ValueError, match="is not an integer"):
        render("vllm-prestart.sh.j2", node="halo1", gpus="2; reboot", grace=20)


def serve_script(template: str, value: str, comment: str) -> str:
    return templates("roles.serve")(
        template,
        node=comment,
        role="worker",
        model=comment,
        node_ip=value,
        head_ip=value,
        ports=PORTS,
        node_ports=NODE_PORTS,
        wait=30,
        object_store_mib=1024,
        pinned=[value],
        gpus=2,
        grace=20,
        argv=[value, f"--served-model-name={value}", "--port=8000"],
        fence={"dir": value, "file": value, "variable": "HALO_METRICS_NETWORKS", "networks": value},
    )


def exec_words(script: str, command: str, shell: str, tmp_path: Path) -> list[str]:
    """The words the script's last command (`exec COMMAND ...`, to its end) hands COMMAND, as
    `shell` parses them."""
    line = script[script.index(f"exec {command}") :].replace(f"exec {command}", "printf '%s\\0'")
    done = subprocess.run(
        [shell, "-c", line], capture_output=True, timeout=10, cwd=tmp_path, env={"PATH": "/bin"}
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().split("\0")[:-1]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("hostile", range(len(HOSTILE)))
def test_the_scripts_hand_each_value_over_whole(shell: str, hostile: int, tmp_path: Path) -> None:
    mark = tmp_path / "ran"
    value = marked(HOSTILE[hostile], mark)
    comment = marked(ONE_LINE_HOSTILE[hostile % len(ONE_LINE_HOSTILE)], mark)
    vllm = serve_script("vllm-start.sh.j2", value, comment)
    ray = serve_script("ray-start.sh.j2", value, comment)
    assert exec_words(vllm, "vllm serve", shell, tmp_path) == [
        value,
        f"--served-model-name={value}",
        "--port=8000",
    ]
    words = exec_words(ray, "ray start", shell, tmp_path)
    assert f"--address={value}:{PORTS['port']}" in words and f"--node-ip-address={value}" in words
    for script in (vllm, ray, serve_script("vllm-prestart.sh.j2", value, comment)):
        parsed = subprocess.run([shell, "-n", "-c", script], capture_output=True, timeout=10)
        assert parsed.returncode == 0, parsed.stderr
    assert not mark.exists()


def test_the_python_of_the_scripts_holds_the_values_as_strings() -> None:
    """ray-start's readiness probe is Python in a quoted here-document: a value is a literal."""
    value = "\"); import os; os.system('reboot')  #"
    script = serve_script("ray-start.sh.j2", value, "halo1")
    start = script.index("import socket")
    code = script[start : script.index("\nPY\n", start)]
    strings = [n.value for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Constant)]
    assert strings.count(value) == 2  # the node's address and the head's, each one literal


def gpu_wait(tmp_path: Path, ray: str, wait: int) -> tuple[subprocess.CompletedProcess, float]:
    """vllm-start.sh as rendered, with `ray` and `vllm` stand-ins first on PATH: its result and
    how long it took."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("ray", ray), ("vllm", "echo serving")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    script = templates("roles.serve")(
        "vllm-start.sh.j2", node="halo1", model="m", head_ip="192.168.100.1", ports=PORTS,
        wait=wait, gpus=2, pinned=["PATH"], argv=["m"], fence=None,
    )  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        ["/bin/sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
    )
    return done, time.monotonic() - started


def test_the_gpu_wait_is_bounded_by_the_clock(tmp_path: Path) -> None:
    """A slow `ray status` counts in the bound: with 2 s per answer and a 4 s bound, vLLM's
    start gives up after about 5 s (counting only its sleeps, it waited 12 s)."""
    done, seconds = gpu_wait(tmp_path, "sleep 2; echo ' 0.0/1.0 GPU'", wait=4)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Ray has fewer than 2 GPUs after 4 s" in done.stderr
    assert seconds < 9, seconds


def test_vllm_starts_within_a_second_of_the_gpus(tmp_path: Path) -> None:
    """Ray reports the GPUs at its second answer: vLLM starts after one 1 s poll (was 3 s)."""
    count = tmp_path / "asked"
    ray = f"echo x >> {count}; [ $(wc -l < {count}) -ge 2 ] && echo ' 0.0/2.0 GPU' || true"
    done, seconds = gpu_wait(tmp_path, ray, wait=30)
    assert done.returncode == 0 and done.stdout.strip().endswith("serving"), done.stderr
    assert seconds < 2.5, seconds
