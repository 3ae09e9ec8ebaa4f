"""Managed blocks in files others own too: only our block's lines change, in place."""

from __future__ import annotations

from halo_cluster.roles.launcher.blocks import BEGIN, END, with_block


def test_block_appended_to_a_file_without_one() -> None:
    assert with_block(None, ["a"]) == f"{BEGIN}\na\n{END}\n"
    assert with_block("mine\n", ["a"]) == f"mine\n{BEGIN}\na\n{END}\n"


def test_block_replaced_where_it_stands_and_lines_after_it_kept() -> None:
    text = f"before\n{BEGIN}\nold\n{END}\nappended by ssh\n"
    assert with_block(text, ["new"]) == f"before\n{BEGIN}\nnew\n{END}\nappended by ssh\n"
    assert with_block(text, ["old"]) == text  # unchanged: no drift


def test_a_second_copy_of_our_block_goes() -> None:
    text = f"{BEGIN}\nold\n{END}\nuser\n{BEGIN}\nolder\n{END}\n"
    assert with_block(text, ["new"]) == f"{BEGIN}\nnew\n{END}\nuser\n"
