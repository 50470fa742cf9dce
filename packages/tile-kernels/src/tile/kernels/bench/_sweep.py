"""A comparison per size: `Sweep`, its JSON, and `plot` (one line per contender over a log2 size axis)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tile.frontend import ArgumentError
from tile.kernels.bench._compare import METRICS, Comparison
from tile.kernels.bench._load import entry, mapping, number, read_json, text
from tile.kernels.bench._provenance import provenance
from tile.kernels.bench._svg import PALETTE, Line, line_chart

__all__ = ["Sweep", "plot"]


@dataclass
class Sweep:
    """`Comparison` results over sizes, in the order added.

    Parameters
    ----------
    name : str
        What is swept (the plot's title), e.g. ``"softmax f16, 4096 rows"``.
    x_label : str
        What a size is, e.g. ``"row length"``.
    info : dict
        Provenance (device, versions, time); taken when the sweep is made unless given.
    """

    name: str
    x_label: str = "size"
    points: list[tuple[int | float, Comparison]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=provenance)

    def add(self, size: float, comparison: Comparison) -> None:
        """Record ``comparison`` at ``size`` (> 0: sizes are drawn on a log2 axis)."""
        if isinstance(size, bool) or not isinstance(size, (int, float)) or not 0 < size < math.inf:
            raise ArgumentError(f"Sweep.add: size must be a positive number, finite (a log2 axis), got {size!r}")
        if not isinstance(comparison, Comparison):
            raise ArgumentError(f"Sweep.add: pass the Comparison that bench.compare returned, not {comparison!r}")
        self.points.append((size, comparison))

    @property
    def contenders(self) -> list[str]:
        """Every contender's name, in the order first seen (measured or failed)."""
        seen: dict[str, None] = {}
        for _, c in self.points:
            seen.update(dict.fromkeys([*c.samples, *c.failures]))
        return list(seen)

    def series(self, metric: str = "ms") -> dict[str, list[tuple[int | float, float | None]]]:
        """``{contender: [(size, metric value or None), ...]}`` sorted by size (None where it failed or is absent)."""
        if metric not in METRICS:
            raise ArgumentError(f"bench: metric={metric!r} is not one of {', '.join(METRICS)}")
        ordered = sorted(self.points, key=lambda p: p[0])
        return {name: [(size, c.value(name, metric)) for size, c in ordered] for name in self.contenders}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: name, x label, info and each point's size and comparison."""
        points = [{"size": size, "comparison": c.to_dict()} for size, c in self.points]
        return {"name": self.name, "x_label": self.x_label, "info": self.info, "points": points}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Sweep:
        """The sweep `to_dict` described.

        Raises
        ------
        ArgumentError
            For a field that is missing or of the wrong type or range (a size that is not a positive finite number,
            a bad comparison, ...); nothing is made from a bad file.
        """
        data = mapping(data, "the sweep")
        raw = entry(data, "points", "the sweep")
        if not isinstance(raw, list):
            raise ArgumentError(f"bench: the sweep's points must be a list, got {raw!r:.60}")
        points: list[tuple[int | float, Comparison]] = []
        for item in raw:
            p = mapping(item, "a point of the sweep")
            size = number(entry(p, "size", "a point of the sweep"), "a point's size", positive=True)
            points.append((size, Comparison.from_dict(mapping(entry(p, "comparison", "a point"), "a comparison"))))
        name, x_label = (text(entry(data, k, "the sweep"), f"the sweep's {k}") for k in ("name", "x_label"))
        return cls(name, x_label, points, dict(mapping(entry(data, "info", "the sweep"), "the sweep's info")))

    def to_json(self, path: str | Path) -> Path:
        """Write `to_dict` as JSON to ``path``; returns the path."""
        out = Path(path)
        out.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return out

    @classmethod
    def from_json(cls, path: str | Path) -> Sweep:
        """Read a sweep written by `to_json` (`ArgumentError` for a file that is not valid JSON or not one; see
        `from_dict`)."""
        return cls.from_dict(read_json(path, "sweep"))


def _subtitle(sweep: Sweep) -> str:
    device = sweep.info.get("device", "unknown device")
    if not sweep.points:
        return str(device)
    first = sweep.points[0][1]
    return f"{device}; median of {first.rounds} {first.order} rounds x {first.reps} calls, seed {first.seed}"


def plot(sweep: Sweep, metric: str = "GB/s", *, title: str | None = None) -> str:
    """The SVG text of ``sweep``: ``metric`` (``"GB/s"``, ``"TFLOP/s"`` or ``"ms"``) of each contender's median
    against size on a log2 axis, one line per contender (a failed point breaks its line), with a legend, the device
    and the settings under the title.

    Raises
    ------
    ArgumentError
        For an unknown metric, a rate the comparisons were not given the work for (``flops=`` / ``nbytes=``), a
        sweep with no measured point, or an infinite rate (a median time of 0, below the clock's resolution).
    """
    series = sweep.series(metric)
    lines = [Line(name, pts, PALETTE[i % len(PALETTE)]) for i, (name, pts) in enumerate(series.items())]
    try:
        return line_chart(
            lines,
            title=title or sweep.name,
            subtitle=_subtitle(sweep),
            x_label=f"{sweep.x_label} (log2 scale)",
            y_label=metric,
        )
    except ValueError as exc:
        hint = (
            "time more work per call"
            if "not finite" in str(exc)
            else "add a comparison with a measured contender first"
        )
        raise ArgumentError(f"bench.plot: {exc}; {hint}") from exc
