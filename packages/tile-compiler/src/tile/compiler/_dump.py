"""Stage dumps selected by ``TILE_DUMP`` (ast, resolved, typed, ir, bytecode, cubin; or all).

Text stages go to ``TILE_DUMP_DIR`` as ``<kernel>-<key8>.<stage>.txt`` when it is set, else to stderr under a
header line. Binary stages (bytecode, cubin) always go to files: in ``TILE_DUMP_DIR``, else in
``<tmp>/tile-dump``, and the path is announced on stderr. A stage's text is produced only if that stage is
dumped, so dumping costs nothing when off. A dump that cannot be written is reported, never fatal.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

__all__ = ["Dumper"]

_SUFFIX = {"bytecode": ".tilebc", "cubin": ".cubin"}


class Dumper:
    """Writes the dumps of one compilation.

    Parameters
    ----------
    stages
        The stages to dump (from ``TILE_DUMP``).
    directory
        ``TILE_DUMP_DIR``, or None for stderr / a temporary folder.
    stem
        File name stem, e.g. ``"gemm-1a2b3c4d"``.
    stream
        Where text goes without a directory (default stderr).
    """

    def __init__(self, stages: frozenset[str], directory: Path | None, stem: str, stream: TextIO | None = None) -> None:
        self.stages = stages
        self.directory = directory
        self.stem = re.sub(r"[^A-Za-z0-9_.-]", "_", stem)
        self.stream = stream
        self.written: list[Path] = []

    def wants(self, stage: str) -> bool:
        """Whether ``stage`` is dumped."""
        return stage in self.stages

    def text(self, stage: str, produce: Callable[[], str]) -> None:
        """Dump the text ``produce()`` returns for ``stage`` (called only when ``stage`` is dumped)."""
        if not self.wants(stage):
            return
        content = produce()
        if self.directory is None:
            out = self.stream or sys.stderr
            out.write(f"// ----- TILE_DUMP {stage}: {self.stem} -----\n{content.rstrip()}\n")
            return
        self._write(self.directory / f"{self.stem}.{stage}.txt", content.encode())

    def binary(self, stage: str, data: bytes) -> None:
        """Dump the bytes of ``stage`` to a file and announce its path."""
        if not self.wants(stage):
            return
        folder = self.directory or Path(tempfile.gettempdir()) / "tile-dump"
        path = self._write(folder / f"{self.stem}{_SUFFIX.get(stage, '.bin')}", data)
        if path is not None and self.directory is None:
            (self.stream or sys.stderr).write(f"// ----- TILE_DUMP {stage}: {self.stem} -> {path}\n")

    def _write(self, path: Path, data: bytes) -> Path | None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        except OSError as exc:
            (self.stream or sys.stderr).write(f"// TILE_DUMP could not write {path}: {exc}\n")
            return None
        self.written.append(path)
        return path
