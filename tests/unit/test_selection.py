"""`--limit` and `--exclude` (halo_cluster/tools/selection.py): the nodes they leave, in config
order, and each refusal in one line naming the option and the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from halo_cluster.tools import project, selection
from tests.unit.configs import VALID_ROCE


@pytest.fixture
def cluster(tmp_path: Path):
    path = tmp_path / "cluster.yml"
    path.write_text(VALID_ROCE)
    return project.load(path)


def names(nodes) -> list[str]:
    return [n.name for n in nodes]


def test_no_option_is_every_node_in_config_order(cluster) -> None:
    assert names(selection.select(cluster, [], [])) == ["halo1", "halo2"]


def test_limit_and_exclude_choose_and_left_out_names_the_others(cluster) -> None:
    assert names(selection.select(cluster, ["halo2"], [])) == ["halo2"]
    chosen = selection.select(cluster, [], ["halo2"])
    assert names(chosen) == ["halo1"]
    assert selection.left_out(cluster, chosen) == ["halo2"]


@pytest.mark.parametrize(
    ("limit", "exclude", "said"),
    [
        (["halo9"], [], "--limit 'halo9': no such node in cluster.yml (its nodes: halo1, halo2)"),
        ([], ["halo\x1b"], "--exclude 'halo\\x1b': no such node in cluster.yml"),
        ([""], [], "--limit: empty value"),
        (["halo1"], ["halo1"], "--limit and --exclude leave no node to run on"),
    ],
)
def test_an_unknown_name_or_no_node_left_is_refused_in_one_line(
    cluster, limit: list[str], exclude: list[str], said: str
) -> None:
    with pytest.raises(selection.Refused) as refused:
        selection.select(cluster, limit, exclude)
    assert str(refused.value).startswith(said) and "\n" not in str(refused.value)


def test_both_options_are_repeatable_on_a_parser() -> None:
    from halo_cluster.tools import options

    parser = options.parser("halo-cluster x", None, 1)
    selection.add(parser)
    parsed = parser.parse_args(["--limit", "a", "--limit", "b", "--exclude", "c"])
    assert (parsed.limit, parsed.exclude) == (["a", "b"], ["c"])
