"""`CompiledKernel`: what compiling a kernel produces (cubin, entry symbol, parameter ABI, provenance).

Invariant: a value is immutable and picklable; equality and hashing cover what was compiled (name, ABI, target,
bytecode and its version, cubin, key, tileiras version), not how this call obtained it (origin, timings).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ._pipeline import ir_text
from ._spec import KernelABI, Target

__all__ = ["EMITS", "CompiledKernel"]

EMITS = ("ir", "bytecode", "cubin")


@dataclass(frozen=True)
class CompiledKernel:
    """A compiled kernel: cubin, entry symbol, parameter ABI, and how it was obtained.

    Attributes
    ----------
    name
        Kernel name (the entry symbol).
    abi
        The kernel parameter list the launcher packs.
    target
        What it was compiled for.
    bytecode, bytecode_version
        The Tile IR bytecode and its version.
    cubin
        The cubin, or None for `Target.cpu`.
    key
        The cache key (hex).
    tileiras_version
        Version of the tileiras that made the cubin (None for the CPU target).
    origin
        ``"compiled"``, ``"disk"`` (disk cache hit) or ``"memory"``.
    timings
        Seconds per stage (`STAGES` names, plus ``cache`` for disk lookups) spent by this call.
    cubin_key
        The key of the cubin in the disk cache's bytecode-keyed store (None for the CPU target).
    """

    name: str
    abi: KernelABI
    target: Target
    bytecode: bytes
    bytecode_version: tuple[int, int]
    cubin: bytes | None
    key: str
    tileiras_version: str | None = None
    origin: str = field(default="compiled", compare=False)
    timings: Mapping[str, float] = field(default_factory=dict, compare=False)
    cubin_key: str | None = field(default=None, compare=False)

    @property
    def entry(self) -> str:
        """The cubin symbol to launch."""
        return self.abi.entry

    def ir_text(self) -> str:
        """The Tile IR of the kernel, as ``tileirdisasm`` prints it (read back from the bytecode)."""
        import tile.ir

        return ir_text(tile.ir.read_bytecode(self.bytecode))

    def save(self, directory: str | Path, emit: tuple[str, ...] = EMITS, *, stem: str | None = None) -> list[Path]:
        """Write ``<stem>.tileir`` / ``.tilebc`` / ``.cubin`` (those in ``emit``; stem defaults to the name)."""
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for kind, suffix in (("ir", ".tileir"), ("bytecode", ".tilebc"), ("cubin", ".cubin")):
            if kind not in emit or (kind == "cubin" and self.cubin is None):
                continue
            path = folder / f"{stem or self.name}{suffix}"
            path.write_bytes(
                self.ir_text().encode() if kind == "ir" else self.bytecode if kind == "bytecode" else self.cubin or b""
            )
            written.append(path)
        return written
