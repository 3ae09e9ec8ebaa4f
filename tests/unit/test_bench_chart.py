"""The bench's chart (halo_cluster/tools/bench/chart.py): chart.svg written beside report.md on
every run kept, a well-formed SVG document with no script, one polyline per build in each panel
(output tokens/s, time to first token), axis labels and a legend; one point, many builds, no
runs, a level without a value, and text that needs escaping."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from halo_cluster.tools.bench import chart, store
from tests.recorded import fixture
from tests.unit.helpers_bench import cluster, head

SVG = "{http://www.w3.org/2000/svg}"
RESULT = json.loads(fixture("vllm-bench-serve-result-random-qwen25-vl-3b.json"))
PANEL_IDS = [metric for metric, _, _ in chart.PANELS]


def parsed(text: str) -> ElementTree.Element:
    root = ElementTree.fromstring(text.encode())
    assert root.tag == f"{SVG}svg"
    return root


def polylines(root: ElementTree.Element, metric: str) -> list[list[tuple[float, float]]]:
    """Each polyline of a panel as its points."""
    group = next(g for g in root.iter(f"{SVG}g") if g.get("id") == metric)
    return [
        [tuple(map(float, p.split(","))) for p in line.get("points", "").split()]
        for line in group.iter(f"{SVG}polyline")
    ]


def texts(root: ElementTree.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def line(key_id: str, levels: dict[str, dict], date: str = "20261202T140000Z", **extra) -> dict:
    """An index line as store.py writes it, the fields the chart reads."""
    return {"key_id": key_id, "config_id": "c0ffee000001", "date": date, "levels": levels,
            "image_digest": "sha256:" + key_id.ljust(64, "0"), "vllm": "0.33.0",
            "kernel": "6.18.6-200.fc43.x86_64", "lab": False, **extra}  # fmt: skip


def level(tokens: float | None, ttft: float | None) -> dict:
    return {"output_throughput": tokens, "median_ttft_ms": ttft}


def test_every_run_kept_writes_the_chart_beside_the_report(tmp_path: Path) -> None:
    the_cluster = cluster(tmp_path)
    results = {"1": RESULT, "8": RESULT}
    for run_id, digest in (("r1", None), ("r2", "sha256:" + "b" * 64)):
        store.keep(the_cluster, tmp_path, head(digest), results, run_id)
    assert (tmp_path / "report.md").is_file()
    root = parsed((tmp_path / chart.FILE).read_text())
    for metric in PANEL_IDS:
        lines = polylines(root, metric)
        assert len(lines) == 2 and all(len(points) == 2 for points in lines)
    said = texts(root)
    assert said.count("concurrency") == 2 and {"tokens/s", "ms"} <= set(said)
    assert {"output tokens/s", "time to first token, median"} <= set(said)
    legend = [t for t in said if t.startswith("config ")]
    assert len(legend) == 2 and "image bbbbbbbbbbbb" in legend[1]


def test_a_plain_document_a_ci_page_shows_as_an_image(tmp_path: Path) -> None:
    text = chart.svg([line("a1", {"1": level(100, 5), "8": level(700, 12)})])
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns=')
    assert not re.search(r"<script|href=|<style|url\(|on\w+=", text)  # nothing fetched or run
    root = parsed(text)
    assert root.get("width") and root.get("height") and root.get("viewBox")
    assert root.find(f"{SVG}title") is not None


def test_one_point_is_a_marker_in_the_middle_of_its_axis() -> None:
    root = parsed(chart.svg([line("a1", {"4": level(250.5, 7.5)})]))
    for i, metric in enumerate(PANEL_IDS):
        [points] = polylines(root, metric)
        left = chart.LEFT + i * (chart.PANEL_W + chart.GAP)
        assert len(points) == 1 and points[0][0] == left + chart.PANEL_W / 2
    assert len(list(root.iter(f"{SVG}circle"))) == 2
    assert "4" in texts(root)


def test_many_builds_the_last_shown_and_every_point_inside_its_panel() -> None:
    levels = ("1", "2", "4", "8", "16", "32")
    lines = [
        line(f"b{i:02d}", {c: level(100.0 * i * int(c), 3.0 + i) for c in levels},
             date=f"202612{i + 1:02d}T000000Z")
        for i in range(12)
    ]  # fmt: skip
    root = parsed(chart.svg(lines))
    older = len(lines) - chart.SHOWN
    assert root.find(f"{SVG}title").text.endswith(f"({older} older not shown)")
    legend = [t for t in texts(root) if t.startswith("config ")]
    assert len(legend) == chart.SHOWN and "(20261212T000000Z)" in legend[-1]
    for i, metric in enumerate(PANEL_IDS):
        left = chart.LEFT + i * (chart.PANEL_W + chart.GAP)
        shown = polylines(root, metric)
        assert len(shown) == chart.SHOWN and all(len(p) == len(levels) for p in shown)
        for x, y in (point for points in shown for point in points):
            assert left <= x <= left + chart.PANEL_W
            assert chart.TOP <= y <= chart.TOP + chart.PANEL_H
    [first, *_] = polylines(root, PANEL_IDS[0])
    assert [x for x, _ in first] == sorted(x for x, _ in first)  # ascending concurrency


def test_a_builds_later_run_replaces_its_line() -> None:
    lines = [line("a1", {"1": level(100, 5)}), line("b2", {"1": level(90, 5)}),
             line("a1", {"1": level(120, 4)}, date="20261203T000000Z")]  # fmt: skip
    assert [x["key_id"] for x in chart.series(lines)] == ["b2", "a1"]
    assert chart.series(lines)[-1]["levels"]["1"]["output_throughput"] == 120


def test_a_level_without_a_value_is_left_out_of_its_line() -> None:
    root = parsed(chart.svg([line("a1", {"1": level(100, None), "8": level(700, 12)})]))
    assert [len(p) for p in polylines(root, "output_throughput")] == [2]
    assert [len(p) for p in polylines(root, "median_ttft_ms")] == [1]


def test_no_runs_and_text_that_needs_escaping() -> None:
    assert "No runs yet: halo-cluster bench" in texts(parsed(chart.svg([])))
    odd = line("a1", {"1": level(1, 1)}, kernel='6.18 <"&">', lab=True)
    root = parsed(chart.svg([odd]))
    assert any('kernel 6.18 <"&">, lab' in t for t in texts(root))
    assert "lab stand-in runs: not a model's numbers" in texts(root)
