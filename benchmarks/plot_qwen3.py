"""Plot Qwen3 decode tokens/s against context length from ``benchmarks/results/qwen3.json`` as an SVG.

Reads the row of mode ``"context"`` that ``bench_qwen3.py --contexts ...`` wrote (`qwen3_context`) and draws one line
per contender over a log2 context axis: Tile's graph decode, the weight-streaming roofline at each length, and the
torch / transformers peers where the row has them (a skipped peer has no line). The title names the model, the
device and the commit the numbers came from. The SVG is written by hand (`svg`): no plotting library is needed.

Run from the repository root: ``python benchmarks/plot_qwen3.py`` (writes ``docs/images/qwen3_context.svg`` and
prints the points as a Markdown table, `table`, for the README);
``--results`` and ``--out`` pick other files, ``--model`` the row when the file holds several.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

__all__ = ["SERIES", "context_row", "main", "nice_ticks", "runs", "series", "svg", "table"]

ROOT = Path(__file__).resolve().parent.parent

SERIES: tuple[tuple[str, str, str, str], ...] = (
    # (point key, legend label, colour, stroke dash)
    ("roofline_tokens_per_s", "weight-streaming roofline", "#888888", "6 4"),
    ("tile_graph", "Tile (graph replay)", "#d62728", ""),
    ("transformers_compiled", "transformers + torch.compile", "#1f77b4", ""),
    ("transformers_eager", "transformers eager", "#2ca02c", ""),
    ("torch_eager", "torch eager", "#9467bd", ""),
)
"""The lines drawn, in legend order."""

W, H = 840, 460
LEFT, RIGHT, TOP, BOTTOM = 70, 250, 64, 56


def context_row(data: dict[str, Any], model: str | None = None) -> dict[str, Any]:
    """The ``"context"`` row of ``model`` (or the only one) in a loaded results file; `SystemExit` saying what to
    run when there is none, or which to pick when there are several."""
    rows = [r for r in data.get("rows", []) if r.get("mode") == "context" and model in (None, r.get("model"))]
    if not rows:
        which = f" for model {model}" if model else ""
        raise SystemExit(
            f"no context-sweep row{which} in the results; run "
            "python benchmarks/bench_qwen3.py --contexts 128,512,1024,2048,4096,8192 on the GPU first"
        )
    if len(rows) > 1:
        raise SystemExit(f"several context-sweep rows ({', '.join(str(r['model']) for r in rows)}); pass --model")
    row: dict[str, Any] = rows[0]
    return row


def series(row: dict[str, Any]) -> dict[str, list[tuple[int, float | None]]]:
    """``{point key: [(context, tokens/s or None), ...]}`` over every point, for each line of `SERIES` with at least
    one measured point (None where that point has none: a skip, or a roofline without a bandwidth)."""
    out: dict[str, list[tuple[int, float | None]]] = {}
    for key, *_ in SERIES:
        found: list[tuple[int, float | None]] = []
        for p in row["points"]:
            value = p.get(key)
            rate = value.get("tokens_per_s") if isinstance(value, dict) else value
            measured = isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0
            found.append((int(p["context"]), float(rate) if measured and rate is not None else None))
        if any(r is not None for _, r in found):
            out[key] = sorted(found)
    return out


def runs(points: Sequence[tuple[int, float | None]]) -> list[list[tuple[int, float]]]:
    """The stretches of consecutive measured points (a line is not drawn across a point without a value)."""
    out: list[list[tuple[int, float]]] = [[]]
    for c, r in points:
        if r is None:
            out.append([])
        else:
            out[-1].append((c, r))
    return [run for run in out if run]


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Tick values from 0 to at least ``top`` in 1, 2 or 5 times a power of ten, about ``count`` of them."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def _label(row: dict[str, Any], info: dict[str, Any]) -> tuple[str, str]:
    device = row.get("device") or info.get("device") or "unknown device"
    title = f"Qwen3-{row['model']} batch-1 decode vs context length (random bf16 weights)"
    sub = f"{device}, commit {row.get('commit') or 'unknown'}; {row.get('tokens', '?')} tokens timed per length"
    bandwidth = info.get("bandwidth_Bps")
    if bandwidth:
        sub += f"; roofline: weights + KV at {bandwidth / 1e12:.2f} TB/s"
    return title, sub


def svg(row: dict[str, Any], info: dict[str, Any]) -> str:
    """The SVG text of ``row``'s plot (``info``: the results file's run description, for the device and bandwidth)."""
    lines = series(row)
    if "tile_graph" not in lines:
        raise SystemExit(f"the context row of {row.get('model')} has no Tile points to plot")
    measured = [(c, r) for pts in lines.values() for c, r in pts if r is not None]
    contexts = sorted({c for c, _ in measured})
    lo, hi = math.log2(contexts[0]), math.log2(contexts[-1])
    if hi == lo:
        lo, hi = lo - 1, hi + 1
    ticks = nice_ticks(max(r for _, r in measured) * 1.05)
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(c: float) -> float:
        return LEFT + (math.log2(c) - lo) / (hi - lo) * plot_w

    def y(r: float) -> float:
        return TOP + plot_h - r / ticks[-1] * plot_h

    title, sub = _label(row, info)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{LEFT}" y="24" font-size="15" font-weight="bold">{escape(title)}</text>',
        f'<text x="{LEFT}" y="44" fill="#444">{escape(sub)}</text>',
    ]
    for t in ticks:
        out.append(f'<line x1="{LEFT}" y1="{y(t):.1f}" x2="{LEFT + plot_w}" y2="{y(t):.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    for c in contexts:
        out.append(f'<line x1="{x(c):.1f}" y1="{TOP}" x2="{x(c):.1f}" y2="{TOP + plot_h}" stroke="#f0f0f0"/>')
        out.append(f'<text x="{x(c):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{c}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>')
    out.append(
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{H - 14}" text-anchor="middle">context length (tokens, log scale)</text>'
    )
    mid = TOP + plot_h / 2
    out.append(f'<text transform="translate(18 {mid:.1f}) rotate(-90)" text-anchor="middle">tokens/s</text>')
    legend_y = TOP + 8
    for key, label, colour, dash in SERIES:
        if key not in lines:
            continue
        stroke = f' stroke-dasharray="{dash}"' if dash else ""
        for run in runs(lines[key]):
            pts = " ".join(f"{x(c):.1f},{y(r):.1f}" for c, r in run)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"{stroke}/>')
            out += [f'<circle cx="{x(c):.1f}" cy="{y(r):.1f}" r="3" fill="{colour}"/>' for c, r in run]
        lx = LEFT + plot_w + 16
        out.append(
            f'<line x1="{lx}" y1="{legend_y}" x2="{lx + 24}" y2="{legend_y}" stroke="{colour}" '
            f'stroke-width="2"{stroke}/>'
        )
        out.append(f'<text x="{lx + 30}" y="{legend_y + 4}">{escape(label)}</text>')
        legend_y += 20
    out.append("</svg>")
    return "\n".join(out) + "\n"


def table(row: dict[str, Any]) -> str:
    """The row's points as a Markdown table (tokens/s; Tile's fraction of the roofline; a skipped peer is "-")."""
    present = series(row)
    peers = [(k, label) for k, label, *_ in SERIES[2:] if k in present]
    head = ["context", "Tile graph", "roofline", "Tile / roofline", *(label for _, label in peers)]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    cells = {k: dict(pts) for k, pts in present.items()}
    for p in row["points"]:
        n = int(p["context"])

        def rate(key: str, n: int = n) -> str:
            value = cells.get(key, {}).get(n)
            return "-" if value is None else f"{value:.1f}"

        share = p.get("tile_graph", {}).get("roofline_fraction")
        frac = f"{share:.0%}" if p.get("roofline_tokens_per_s") and share is not None else "-"
        out.append(
            "| "
            + " | ".join([str(n), rate("tile_graph"), rate("roofline_tokens_per_s"), frac])
            + "".join(f" | {rate(k)}" for k, _ in peers)
            + " |"
        )
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> Path:
    """Write the plot; returns the path written."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "qwen3.json")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "qwen3_context.svg")
    p.add_argument("--model", default=None, help="the row's model when the file holds several sweeps")
    args = p.parse_args(argv)
    if not args.results.is_file():
        raise SystemExit(f"{args.results}: no such results file; run benchmarks/bench_qwen3.py --contexts ... first")
    data = json.loads(args.results.read_text())
    text = svg(context_row(data, args.model), data.get("info", {}))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(table(context_row(data, args.model)), end="")
    print(f"wrote {args.out}")
    return Path(args.out)


if __name__ == "__main__":
    main()
