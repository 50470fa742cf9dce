"""Plot Qwen3 decode tokens/s against context length from ``benchmarks/results/qwen3.json`` as an SVG.

Reads the row of mode ``"context"`` that ``bench_qwen3.py --contexts ...`` wrote (`qwen3_context`) and draws one line
per contender over a log2 context axis: Tile's graph decode, the weight-streaming roofline at each length, and the
torch / transformers peers where the row has them (a skipped peer has no line). The title names the model, the
device and the commit the numbers came from. The SVG is written by hand (`svg`, through
`tile.kernels.bench.line_chart`): no plotting library is needed.

Run from the repository root: ``python benchmarks/plot_qwen3.py`` (writes ``docs/images/qwen3_context.svg`` and
prints the points as a Markdown table, `table`, for the README);
``--results`` and ``--out`` pick other files, ``--model`` the row when the file holds several.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tile.kernels.bench import Line, line_chart, nice_ticks, runs

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


def _label(row: dict[str, Any], info: dict[str, Any]) -> tuple[str, str]:
    device = row.get("device") or info.get("device") or "unknown device"
    title = f"Qwen3-{row['model']} batch-1 decode vs context length (random bf16 weights)"
    sub = f"{device}, commit {row.get('commit') or 'unknown'}; {row.get('tokens', '?')} tokens timed per length"
    bandwidth = info.get("bandwidth_Bps")
    if bandwidth:
        sub += f"; roofline: weights + KV at {bandwidth / 1e12:.2f} TB/s"
    return title, sub


def svg(row: dict[str, Any], info: dict[str, Any]) -> str:
    """The SVG text of ``row``'s plot (``info``: the results file's run description, for the device and bandwidth),
    drawn by the library's chart writer, `tile.kernels.bench.line_chart`."""
    lines = series(row)
    if "tile_graph" not in lines:
        raise SystemExit(f"the context row of {row.get('model')} has no Tile points to plot")
    drawn = [Line(label, lines[key], colour, dash) for key, label, colour, dash in SERIES if key in lines]
    title, sub = _label(row, info)
    return line_chart(
        drawn, title=title, subtitle=sub, x_label="context length (tokens, log scale)", y_label="tokens/s"
    )


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
