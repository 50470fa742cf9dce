"""A line chart over a log2 x axis, written as SVG text by hand (no plotting library is needed).

One `Line` per contender: its points ``(x, y or None)`` are drawn as polylines (a point without a value breaks the
line, `runs`) with a dot per point and one legend entry. The y axis starts at 0 and ends on a round tick
(`nice_ticks`); the x axis is log2, with a tick at every x that has a value. Text is XML-escaped, so any label is
safe to put in the chart (characters XML cannot hold, such as control
characters, become U+FFFD).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape as _xml_escape

__all__ = ["PALETTE", "Line", "line_chart", "nice_ticks", "runs"]

PALETTE = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#888888")
"""Line colours given in order to lines without their own."""

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters XML 1.0 forbids anywhere, even escaped (controls, lone surrogates, U+FFFE/U+FFFF): one of them makes the
whole file unreadable to a browser or an XML parser."""


def escape(text: str, entities: dict[str, str] | None = None) -> str:
    """``text`` safe inside an SVG element or a double-quoted attribute: ``&``, ``<``, ``>`` (and ``entities``)
    escaped, and characters XML cannot hold at all replaced by U+FFFD."""
    return _xml_escape(_NOT_XML.sub("\ufffd", str(text)), entities or {})


W, H = 840, 460
LEFT, RIGHT, TOP, BOTTOM = 70, 250, 64, 56


@dataclass(frozen=True)
class Line:
    """One line of a chart: legend ``label``, ``points`` ``(x > 0, y or None)``, stroke ``colour`` and ``dash``
    (an SVG ``stroke-dasharray`` such as ``"6 4"``; empty for a solid line)."""

    label: str
    points: Sequence[tuple[float, float | None]]
    colour: str
    dash: str = ""


def runs(points: Sequence[tuple[float, float | None]]) -> list[list[tuple[float, float]]]:
    """The stretches of consecutive measured points (a line is not drawn across a point without a value)."""
    out: list[list[tuple[float, float]]] = [[]]
    for c, r in points:
        if r is None:
            out.append([])
        else:
            out[-1].append((c, r))
    return [run for run in out if run]


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Tick values from 0 to at least ``top`` in 1, 2 or 5 times a power of ten, about ``count`` of them.

    Raises
    ------
    ValueError
        For a ``top`` that is not a finite number (an infinite rate: a median time of 0) or a ``count`` below 1.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"nice_ticks: count must be an int >= 1, got {count!r}")
    if not math.isfinite(top):
        raise ValueError(f"nice_ticks: the top of the axis must be a finite number, got {top!r}")
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def _tick_label(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def line_chart(lines: Sequence[Line], *, title: str, subtitle: str, x_label: str, y_label: str) -> str:
    """The SVG text of ``lines`` (drawn and listed in the legend in this order).

    Raises
    ------
    ValueError
        When no line has a measured point, a measured point's x is not positive (the x axis is log2), or an x or y is
        not a finite number (an infinite rate, of a median time of 0, has no place on the axis).
    """
    measured = [(c, r) for line in lines for c, r in line.points if r is not None]
    if not measured:
        raise ValueError(f"nothing to plot in {title!r}: no line has a measured point")
    if not all(math.isfinite(c) and math.isfinite(r) for c, r in measured):
        bad = next((c, r) for c, r in measured if not (math.isfinite(c) and math.isfinite(r)))
        raise ValueError(f"{title!r}: the point {bad} is not finite; every x and y must be a finite number")
    if any(c <= 0 for c, _ in measured):
        raise ValueError(f"{title!r}: every x must be positive on a log2 axis")
    xs = sorted({c for c, _ in measured})
    lo, hi = math.log2(xs[0]), math.log2(xs[-1])
    if hi == lo:
        lo, hi = lo - 1, hi + 1
    ticks = nice_ticks(max(r for _, r in measured) * 1.05)
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(c: float) -> float:
        return LEFT + (math.log2(c) - lo) / (hi - lo) * plot_w

    def y(r: float) -> float:
        return TOP + plot_h - r / ticks[-1] * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{LEFT}" y="24" font-size="15" font-weight="bold">{escape(title)}</text>',
        f'<text x="{LEFT}" y="44" fill="#444">{escape(subtitle)}</text>',
    ]
    for t in ticks:
        out.append(f'<line x1="{LEFT}" y1="{y(t):.1f}" x2="{LEFT + plot_w}" y2="{y(t):.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    for c in xs:
        out.append(f'<line x1="{x(c):.1f}" y1="{TOP}" x2="{x(c):.1f}" y2="{TOP + plot_h}" stroke="#f0f0f0"/>')
        out.append(f'<text x="{x(c):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{_tick_label(c)}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{H - 14}" text-anchor="middle">{escape(x_label)}</text>')
    mid = TOP + plot_h / 2
    out.append(f'<text transform="translate(18 {mid:.1f}) rotate(-90)" text-anchor="middle">{escape(y_label)}</text>')
    legend_y = TOP + 8
    for line in lines:
        colour = escape(line.colour, {'"': "&quot;"})
        stroke = f' stroke-dasharray="{escape(line.dash, {chr(34): "&quot;"})}"' if line.dash else ""
        for run in runs(line.points):
            pts = " ".join(f"{x(c):.1f},{y(r):.1f}" for c, r in run)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"{stroke}/>')
            out += [f'<circle cx="{x(c):.1f}" cy="{y(r):.1f}" r="3" fill="{colour}"/>' for c, r in run]
        lx = LEFT + plot_w + 16
        out.append(
            f'<line x1="{lx}" y1="{legend_y}" x2="{lx + 24}" y2="{legend_y}" stroke="{colour}" '
            f'stroke-width="2"{stroke}/>'
        )
        out.append(f'<text x="{lx + 30}" y="{legend_y + 4}">{escape(line.label)}</text>')
        legend_y += 20
    out.append("</svg>")
    return "\n".join(out) + "\n"
