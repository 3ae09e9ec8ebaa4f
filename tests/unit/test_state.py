"""The state folder (issue 35, item 7; halo_cluster/config/state.py): the lock, Ray's token and
reports/ in `.halo-cluster/` beside the config whatever the current folder, moved by --state or
$HALO_STATE; a lock beside the config (before the state folder) read there until a deploy moves
it; the read-only commands write nothing in the current folder and never the lock or the token."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from halo_cluster.config import lock as locks
from halo_cluster.config import state
from halo_cluster.config.loader import load_cluster
from halo_cluster.tools import cli, project
from halo_cluster.tools.bench import run
from halo_cluster.tools.commands import deploy, exits
from tests.recorded import skopeo_digest

NAME = "docker.io/kyuz0/vllm-therock-gfx1151"
# two nodes that refuse connections at once: status reaches them and says so, quickly
NODES = "".join(
    f"  - {{name: halo{i}, ssh: {{host: 127.0.0.{i}, port: 1}}, data: {{interface: auto}}}}\n"
    for i in (1, 2)
)
SERVING = "cluster_user: vllm\nserve: {enabled: true, model: Qwen/Qwen3-14B}\nnodes:\n" + NODES


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The config in one folder, the current folder another, empty."""
    (tmp_path / "cluster").mkdir()
    (tmp_path / "here").mkdir()
    config = tmp_path / "cluster" / "cluster.yml"
    config.write_text(SERVING)
    monkeypatch.chdir(tmp_path / "here")
    monkeypatch.setenv("CLUSTER_CONFIG", str(config))
    monkeypatch.delenv(state.ENV, raising=False)
    return config, tmp_path / "here"


def old_lock(folder: Path) -> Path:
    """A lock where versions before the state folder wrote it: beside the config."""
    path = folder / locks.LOCK_FILE
    locks.write(path, locks.Lock("halo1", f"{NAME}:latest", skopeo_digest()))
    return path


def test_the_state_folder_is_beside_the_config_whatever_the_current_folder(
    layout: tuple[Path, Path],
) -> None:
    config, _ = layout
    folder = config.parent.resolve() / ".halo-cluster"
    assert project.state() == folder
    assert project.reports() == folder / "reports"
    assert run.reports() == folder / "reports" / "bench"
    cluster = load_cluster(config)
    assert cluster.container.lock == str(folder / locks.LOCK_FILE)
    assert cluster.serve.ray_token_file == str(folder / "ray-token")


def test_state_option_or_variable_moves_it(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, here = layout
    monkeypatch.setenv(state.ENV, "elsewhere")  # relative: to the current folder
    assert project.state() == here.resolve() / "elsewhere"
    assert load_cluster(config).serve.ray_token_file == str(here.resolve() / "elsewhere/ray-token")
    seen: list[str] = []
    monkeypatch.setattr(
        cli.command("where"), "main", lambda args: seen.append(os.environ[state.ENV]) or 0
    )
    assert cli.main(["where", "--state", "other"]) == 0
    assert cli.main(["--state=other", "where"]) == 0
    assert seen == [str(here.resolve() / "other")] * 2  # absolute: the deploy runs elsewhere


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--state", "", "where"], "--state: empty value"),
        (["--state", "a", "where", "--state", "b"], "--state given twice"),
        (["where", "--state"], "--state needs a DIR"),
    ],
)
def test_a_bad_state_option_is_one_line(
    layout: tuple[Path, Path], capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    assert stopped.value.code == exits.USAGE
    assert capsys.readouterr().err.startswith(f"halo-cluster: {said}")


def test_an_old_lock_is_read_where_it_is_until_a_deploy_moves_it(
    layout: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, _ = layout
    old = old_lock(config.parent)
    new = config.parent.resolve() / ".halo-cluster" / locks.LOCK_FILE
    cluster = load_cluster(config)
    assert cluster.container.lock == str(old.resolve())
    assert cluster.container.digest == skopeo_digest()
    for args, upgrading in ((["--dry"], ""), (["--yes"], "1")):  # neither writes it here
        monkeypatch.setenv(locks.UPGRADING, upgrading)
        deploy._move_old_lock(args)
        assert old.exists() and not new.exists()
    monkeypatch.delenv(locks.UPGRADING)
    capsys.readouterr()
    deploy._move_old_lock(["--yes"])
    assert not old.exists() and locks.read(new)[0] is not None
    assert capsys.readouterr().err == (
        f"halo-cluster deploy: {old.resolve()}: moved into the state folder, now {new}\n"
    )
    assert load_cluster(config).container.lock == str(new)
    old_lock(config.parent)  # a second one beside the config: the state folder's wins
    assert locks.move_old(config.parent) is None
    assert load_cluster(config).container.lock == str(new)


def files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("serving", [True, False])
def test_read_only_commands_write_nothing_here_nor_the_lock_or_token(
    layout: tuple[Path, Path], capsys: pytest.CaptureFixture[str], serving: bool
) -> None:
    """`where` and `status` (serving, both nodes refusing; not serving) in another folder: the
    current folder stays empty, the config's folder holds what it held (an old lock stays
    where it is), and no state folder with a lock or a token appears."""
    config, here = layout
    if not serving:
        config.write_text(SERVING.replace("enabled: true", "enabled: false"))
    old_lock(config.parent)
    before = files(config.parent)
    assert cli.main(["where"]) == exits.OK
    assert cli.main(["status"]) == exits.ERROR  # serving or not, status reads the nodes
    assert cli.main(["where", "--json"]) == exits.OK
    capsys.readouterr()
    assert files(here) == []
    assert files(config.parent) == before
    assert not (config.parent / ".halo-cluster").exists()
