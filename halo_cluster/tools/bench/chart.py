"""The bench's chart (reports/bench/chart.svg, beside report.md): output tokens/s and time to
first token (median) against concurrency, one line per build of a configuration kept (its
latest run: the image, kernel and firmware of one `key_id`), the most recent SHOWN of them.

Plain SVG 1.1, written here without a plotting library: no script, no external font or style,
so that a CI page shows it as an image; concurrency on a log2 axis (levels are powers of two
or near), each axis labelled, a legend below both panels."""

from __future__ import annotations

import math
from xml.sax.saxutils import escape, quoteattr

FILE = "chart.svg"
SHOWN = 8  # lines a reader can still tell apart; the older ones are counted in the title
# Okabe and Ito's palette: told apart with every common colour blindness
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
# (vLLM's result field, the panel's title, its value axis' label)
PANELS = (
    ("output_throughput", "output tokens/s", "tokens/s"),
    ("median_ttft_ms", "time to first token, median", "ms"),
)
WIDTH, PANEL_W, PANEL_H = 960, 380, 260
LEFT, TOP, GAP = 70, 70, 100  # the first panel's left edge, the panels' top, between panels
LEGEND_ROW = 18
TICKS = 5


def series(lines: list[dict]) -> list[dict]:
    """The latest run of each build (`key_id`) kept, oldest first, the last SHOWN of them."""
    latest: dict[str, dict] = {}
    for line in lines:
        latest.pop(line["key_id"], None)  # re-inserted: the order is of each build's last run
        latest[line["key_id"]] = line
    return list(latest.values())[-SHOWN:]


def label(line: dict) -> str:
    image = line["image_digest"].removeprefix("sha256:")[:12]
    lab = ", lab" if line.get("lab") else ""
    return (
        f"config {line['config_id']}, image {image}, vLLM {line.get('vllm') or '?'}, "
        f"kernel {line.get('kernel') or '?'}{lab} ({line['date']})"
    )


def nice(top: float) -> float:
    """The axis' end: the least 1, 2 or 5 times a power of ten at or above `top`."""
    if top <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(top))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= top)


def levels(shown: list[dict]) -> list[int]:
    return sorted({int(c) for line in shown for c in line["levels"]})


def x_of(concurrency: int, all_levels: list[int], left: float) -> float:
    low, high = math.log2(all_levels[0]), math.log2(all_levels[-1])
    if high == low:
        return left + PANEL_W / 2
    return left + (math.log2(concurrency) - low) / (high - low) * PANEL_W


def _text(x: float, y: float, text: str, **attributes: str) -> str:
    extra = "".join(f" {name.replace('_', '-')}={quoteattr(v)}" for name, v in attributes.items())
    return f'<text x="{x:.1f}" y="{y:.1f}"{extra}>{escape(text)}</text>'


def panel(shown: list[dict], metric: str, title: str, unit: str, left: float) -> list[str]:
    """One panel: its frame, axes with ticks and labels, and a polyline per build."""
    all_levels = levels(shown)
    values = [(level or {}).get(metric) for line in shown for level in line["levels"].values()]
    top = nice(max((v for v in values if isinstance(v, int | float)), default=0))
    bottom = TOP + PANEL_H
    out = [f'<g id={quoteattr(metric)}>', _text(left + PANEL_W / 2, TOP - 14, title,
           text_anchor="middle", font_weight="bold")]  # fmt: skip
    out.append(
        f'<rect x="{left}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" '
        'fill="none" stroke="#888"/>'
    )
    for i in range(TICKS + 1):
        y = bottom - i * PANEL_H / TICKS
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + PANEL_W}" y2="{y:.1f}" '
                   'stroke="#ddd"/>')  # fmt: skip
        out.append(_text(left - 6, y + 4, f"{top * i / TICKS:g}", text_anchor="end"))
    for c in all_levels:
        x = x_of(c, all_levels, left)
        out.append(_text(x, bottom + 16, str(c), text_anchor="middle"))
    out.append(_text(left + PANEL_W / 2, bottom + 34, "concurrency", text_anchor="middle"))
    middle = TOP + PANEL_H / 2
    out.append(_text(left - 48, middle, unit, text_anchor="middle",
                     transform=f"rotate(-90 {left - 48} {middle:.1f})"))  # fmt: skip
    for colour, line in zip(COLOURS, shown, strict=False):
        points = [
            (x_of(int(c), all_levels, left), bottom - v / top * PANEL_H)
            for c, level in sorted(line["levels"].items(), key=lambda item: int(item[0]))
            if isinstance(v := (level or {}).get(metric), int | float)
        ]
        text = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        out.append(f'<polyline points="{text}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in points]
    return [*out, "</g>"]


def svg(lines: list[dict]) -> str:
    """The chart of every build kept in `lines` (index.jsonl's), as one SVG document."""
    shown = series(lines)
    older = len({line["key_id"] for line in lines}) - len(shown)
    height = TOP + PANEL_H + 60 + LEGEND_ROW * max(len(shown), 1)
    heading = "halo-cluster bench: the latest run of each build kept"
    if older > 0:
        heading += f" ({older} older not shown)"
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" '
        'font-size="12">',
        f"<title>{escape(heading)}</title>",
        '<rect width="100%" height="100%" fill="white"/>',
        _text(LEFT, 18, heading, font_weight="bold"),
    ]
    if not shown:
        return "\n".join([*out, _text(LEFT, TOP + 20, "No runs yet: halo-cluster bench"), "</svg>"])
    if any(line.get("lab") for line in shown):
        out.append(_text(LEFT, 38, "lab stand-in runs: not a model's numbers"))
    for i, (metric, title, unit) in enumerate(PANELS):
        out += panel(shown, metric, title, unit, LEFT + i * (PANEL_W + GAP))
    legend = TOP + PANEL_H + 60
    for i, (colour, line) in enumerate(zip(COLOURS, shown, strict=False)):
        y = legend + i * LEGEND_ROW
        out.append(f'<line x1="{LEFT}" y1="{y - 4}" x2="{LEFT + 24}" y2="{y - 4}" '
                   f'stroke="{colour}" stroke-width="3"/>')  # fmt: skip
        out.append(_text(LEFT + 32, y, label(line)))
    return "\n".join([*out, "</svg>"]) + "\n"
