"""A progress bar for loading weights: ``rich``'s when it is installed, else a plain one on stderr."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["progress_bar"]


@contextmanager
def progress_bar(
    title: str, *, stream: TextIO | None = None, plain: bool = False
) -> Iterator[Callable[[str, int, int], None]]:
    """Yield ``update(name, done, total)``; draws ``rich``'s bar unless ``plain`` or ``rich`` is missing."""
    out = stream or sys.stderr
    if not plain:
        try:
            from rich.progress import Progress  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            plain = True
    if plain:
        width = 30

        def update(name: str, done: int, total: int) -> None:
            filled = width * done // max(total, 1)
            end = "\n" if done >= total else ""
            out.write(f"\r{title} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {name[-40:]:<40}{end}")
            out.flush()

        yield update
        return
    with Progress(transient=False) as bar:
        task = bar.add_task(title, total=None)

        def update(name: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, description=f"{title} {name[-40:]}")

        yield update
