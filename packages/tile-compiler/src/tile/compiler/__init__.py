"""tile.compiler: Python tile kernels → typed Tile IR → bytecode → ``tileiras`` → cubin, without a GPU.

Stages, in order (`STAGES`): parse → resolve → typecheck → lower → verify → bytecode → cubin; ``TILE_DUMP=ast,
resolved,typed,ir,bytecode,cubin`` dumps them. The kernel language is `tile.compiler.lang`.

Compile-only API
    `compile_kernel` runs the stages behind an in-memory cache (single flight per key) and a disk cache
    (``TILE_CACHE_DIR``) and returns a `CompiledKernel` (cubin, entry symbol, parameter ABI `KernelABI`).
    A launcher must check the ABI's `HostGuard` list (`failed_guard`) before each launch: index checks whose
    subject the host knows (extents, grid) are left to it, so the kernel carries none.
    `compile_module` / `compile_bytecode` run only the back half on a built `tile.ir.Module` or on bytecode.
What to compile for
    `Specialization` (dtypes, const generics, per-tensor `ArraySpec` facts, `CompileOptions`) and `Target`
    (``Target("sm_90")``, ``Target.for_device()``, ``Target.cpu()``). `specialize` derives the specialization of
    a call from its tensors' shapes, strides and addresses; launchers use it so that their keys match kernels
    compiled ahead of time. Entry hints take an int or a per-arch table (`by_arch`, a `ByArch`); the kernel's
    default math modes are ``CompileOptions(flush_to_zero=..., approx=...)``; all of it is in every cache key.
Toolchain and caches
    `toolchain` / `find_tileiras` / `Toolchain`; `choose_version`; `DiskCache`, `MemoryCache`, `cache_stats`;
    `frontend_key`, `cubin_key`; `CacheTrustWarning` (a cache folder or file someone else could write, not used).
    Settings: every ``TILE_*`` variable, parsed by `knobs` into `Knobs`.
Errors (all derive from `tile.compiler.TileError`, which is `tile.errors.TileError`, Tile's one error root)
    `CompileError` (user code, with the source line), `TileirasError` (names kernel, arch, cause and the kept
    bytecode), `TileirasNotFoundError`, `ToolchainError`, `SpecError`, `KnobError`.

>>> import tile.compiler as tc
>>> kernel = tc.compile_kernel(add, tc.Specialization.make(consts={"B": 128}), "sm_90")  # doctest: +SKIP
>>> kernel.entry, len(kernel.cubin), kernel.abi.slots[0]                                  # doctest: +SKIP
>>> options = tc.CompileOptions(occupancy=tc.by_arch(sm_90=2, default=1), flush_to_zero=True)
>>> options.occupancy.get("sm_90"), options.occupancy.get("sm_100")
(2, 1)

Command line: ``tile compile FILE.py::KERNEL --arch sm_90 --emit ir|bytecode|cubin|all --const B=128 -o DIR``.
"""

from __future__ import annotations

from tile.compiler import lang
from tile.compiler._api import (
    clear_memory_cache,
    compile_bytecode,
    compile_kernel,
    compile_module,
)
from tile.compiler._cache import KEY_SCHEMA, CacheStats, DiskCache, MemoryCache, cache_stats
from tile.compiler._compiled import CompiledKernel
from tile.compiler._diagnostics import CompileError
from tile.compiler._errors import TileError
from tile.compiler._fingerprint import cubin_key, frontend_key
from tile.compiler._guards import Bound, HostGuard, failed_guard
from tile.compiler._knobs import KnobError, Knobs, knobs
from tile.compiler._lower import lower
from tile.compiler._parse import parse
from tile.compiler._pipeline import STAGES, choose_version
from tile.compiler._resolve import resolve
from tile.compiler._spec import (
    AbiSlot,
    ArraySpec,
    ByArch,
    CompileOptions,
    KernelABI,
    ScalarSpec,
    SpecError,
    Specialization,
    Target,
    by_arch,
)
from tile.compiler._specialize import specialize
from tile.compiler._toolchain import (
    TileirasError,
    TileirasNotFoundError,
    Toolchain,
    ToolchainError,
    find_tileiras,
    toolchain,
)
from tile.compiler._trust import CacheTrustWarning
from tile.compiler._typecheck import typecheck

__all__ = [
    "KEY_SCHEMA",
    "STAGES",
    "AbiSlot",
    "ArraySpec",
    "Bound",
    "ByArch",
    "CacheStats",
    "CacheTrustWarning",
    "CompileError",
    "CompileOptions",
    "CompiledKernel",
    "DiskCache",
    "HostGuard",
    "KernelABI",
    "KnobError",
    "Knobs",
    "MemoryCache",
    "ScalarSpec",
    "SpecError",
    "Specialization",
    "Target",
    "TileError",
    "TileirasError",
    "TileirasNotFoundError",
    "Toolchain",
    "ToolchainError",
    "by_arch",
    "cache_stats",
    "choose_version",
    "clear_memory_cache",
    "compile_bytecode",
    "compile_kernel",
    "compile_module",
    "cubin_key",
    "failed_guard",
    "find_tileiras",
    "frontend_key",
    "knobs",
    "lang",
    "lower",
    "parse",
    "resolve",
    "specialize",
    "toolchain",
    "typecheck",
]
