"""tile.compiler: Python tile kernels → typed Tile IR → bytecode → ``tileiras`` → cubin, without a GPU.

Stages, in order (`STAGES`): parse → resolve → typecheck → lower → verify → bytecode → cubin; ``TILE_DUMP=ast,
resolved,typed,ir,bytecode,cubin`` dumps them. `compile_kernel` runs them behind an in-memory cache (single
flight) and a disk cache (``TILE_CACHE_DIR``) and returns a `CompiledKernel` (cubin, entry, parameter ABI).
`Specialization` and `Target` say what to compile for; `compile_module` / `compile_bytecode` run only the back
half. The kernel language is `tile.compiler.lang`; user-code errors are `CompileError`, tileiras failures
`TileirasError`. Every ``TILE_*`` variable is read in `_knobs` (see `Knobs`). The CLI is ``tile compile``.
"""

from __future__ import annotations

from tile.compiler import lang
from tile.compiler._api import CompiledKernel, clear_memory_cache, compile_bytecode, compile_kernel, compile_module
from tile.compiler._cache import KEY_SCHEMA, CacheStats, DiskCache, MemoryCache, cache_stats
from tile.compiler._diagnostics import CompileError
from tile.compiler._fingerprint import cubin_key, frontend_key
from tile.compiler._knobs import KnobError, Knobs, knobs
from tile.compiler._lower import lower
from tile.compiler._parse import parse
from tile.compiler._pipeline import STAGES, choose_version
from tile.compiler._resolve import resolve
from tile.compiler._spec import (
    AbiSlot,
    ArraySpec,
    CompileOptions,
    KernelABI,
    ScalarSpec,
    SpecError,
    Specialization,
    Target,
)
from tile.compiler._toolchain import (
    TileirasError,
    TileirasNotFoundError,
    Toolchain,
    ToolchainError,
    find_tileiras,
    toolchain,
)
from tile.compiler._typecheck import typecheck

__all__ = [
    "KEY_SCHEMA",
    "STAGES",
    "AbiSlot",
    "ArraySpec",
    "CacheStats",
    "CompileError",
    "CompileOptions",
    "CompiledKernel",
    "DiskCache",
    "KernelABI",
    "KnobError",
    "Knobs",
    "MemoryCache",
    "ScalarSpec",
    "SpecError",
    "Specialization",
    "Target",
    "TileirasError",
    "TileirasNotFoundError",
    "Toolchain",
    "ToolchainError",
    "cache_stats",
    "choose_version",
    "clear_memory_cache",
    "compile_bytecode",
    "compile_kernel",
    "compile_module",
    "cubin_key",
    "find_tileiras",
    "frontend_key",
    "knobs",
    "lang",
    "lower",
    "parse",
    "resolve",
    "toolchain",
    "typecheck",
]
