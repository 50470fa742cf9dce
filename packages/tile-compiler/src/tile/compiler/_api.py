"""The compile-only API: a Python kernel (or a built module, or bytecode) to a `CompiledKernel`, no GPU needed.

Lookup order for `compile_kernel`: the in-memory cache (single flight per key across threads), then the disk
cache by frontend key (a hit skips every stage), then the full pipeline whose tileiras step is itself behind the
bytecode-keyed disk cache. On a machine without tileiras a disk entry made elsewhere for the same frontend key is
used as is (the GPU-machine fallback: compile ahead with ``tile compile ... --arch sm_90`` into a cache folder,
carry it, point ``TILE_CACHE_DIR`` at it).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tile.ir import Module

from ._cache import CacheEntry, DiskCache, MemoryCache, count
from ._captures import Captures
from ._captures import captures as take_captures
from ._compiled import CompiledKernel
from ._diagnostics import CompileError
from ._dump import Dumper
from ._fingerprint import frontend_key
from ._knobs import Knobs, knobs
from ._pipeline import Clock, Frontend, choose_version, finish_module, run_backend, run_frontend
from ._resolve import pinned
from ._spec import (
    AbiSlot,
    CompileOptions,
    KernelABI,
    SpecError,
    Specialization,
    Target,
)
from ._toolchain import INSTALL_HINT, TileirasNotFoundError, Toolchain, toolchain

__all__ = ["clear_memory_cache", "compile_bytecode", "compile_kernel", "compile_module"]

_MEMORY: MemoryCache[tuple[str, str, str], CompiledKernel] = MemoryCache()


def clear_memory_cache() -> None:
    """Forget the kernels compiled in this process (the disk cache is untouched)."""
    _MEMORY.clear()


def compile_kernel(
    fn: Callable[..., object],
    spec: Specialization | None = None,
    target: Target | str = "sm_90",
    *,
    cache: bool = True,
    settings: Knobs | None = None,
    cubin: bool = True,
    captures: Captures | None = None,
) -> CompiledKernel:
    """Compile the tile kernel ``fn`` for ``target`` (no GPU needed).

    Parameters
    ----------
    fn
        The kernel's Python function (its source is read with `inspect`).
    spec
        Dtypes, const generics, array facts and options; missing facts take the annotation's defaults.
    target
        A `Target` or an arch name such as ``"sm_90"``; ``Target.cpu()`` stops after bytecode.
    cache
        Use the in-memory and disk caches (False: run every stage and store nothing).
    settings
        Settings to use instead of the ``TILE_*`` environment (e.g. another cache folder); default `knobs()`.
    cubin
        False when only the Tile IR and bytecode are wanted: without tileiras the kernel is then compiled anyway
        (uncached, with the highest bytecode version the writer knows) and `CompiledKernel.cubin` is None.
    captures
        The snapshot of the kernel's compile-time reads to compile (``tile.compiler._captures.captures(fn)``, taken
        by a caller that keeps it to test later calls against); default: taken here. The key and every stage use
        that one snapshot, so a global rebound by another thread meanwhile cannot give code the key does not name.

    Returns
    -------
    CompiledKernel

    Raises
    ------
    CompileError
        The kernel is not valid Tile code (the message points at the source line).
    TileirasError
        tileiras failed (the message says why, where the bytecode was kept and how to report it).
    TileirasNotFoundError
        No tileiras and no precompiled disk entry for this kernel.
    """
    settings = settings or knobs()
    target = target if isinstance(target, Target) else Target(target)
    spec = _with_default_opt_level(spec or Specialization(), settings.opt_level)
    try:
        snapshot = captures if captures is not None else take_captures(fn)  # reads the kernel: may raise CompileError
        with pinned(snapshot.resolutions()):
            return _compile(fn, spec, target, settings, cache=cache, cubin=cubin, snapshot=snapshot)
    except CompileError as exc:
        if settings.debug:
            raise
        # The message already shows the user's line; the compiler's own frames are noise (TILE_DEBUG=1 keeps them).
        raise exc.with_traceback(None) from None


def _compile(
    fn: Callable[..., object],
    spec: Specialization,
    target: Target,
    settings: Knobs,
    *,
    cache: bool,
    cubin: bool,
    snapshot: Captures,
) -> CompiledKernel:
    """`compile_kernel` with its compile-time reads pinned to ``snapshot``."""
    key = frontend_key(fn, spec, target, settings.bytecode_version, snapshot)
    if not cubin and not target.is_cpu and _find_toolchain(settings) is None:
        # Bytecode needs no tileiras; a disk entry is keyed by the tileiras that made its cubin, so store none.
        job = _Job.start(settings, target, key, cache=False, stem=_stem(fn, key), need_cubin=False)
        return _build(fn, spec, job)
    if not cache:
        return _build(fn, spec, _Job.start(settings, target, key, cache=False, stem=_stem(fn, key)))
    memory_key = (key, str(settings.cache_dir), str(settings.tileiras))
    kernel, hit = _MEMORY.get_or_compute(memory_key, lambda: _load_or_build(fn, spec, target, key, settings))
    if not hit:
        return kernel
    count("memory_hits")
    return dataclasses.replace(kernel, origin="memory", timings={})


def _with_default_opt_level(spec: Specialization, level: int) -> Specialization:
    """Apply ``TILE_OPT_LEVEL`` to a specialization that left the level at its default (before keying it)."""
    default = CompileOptions().opt_level
    if level == default or spec.options.opt_level != default:
        return spec
    return dataclasses.replace(spec, options=dataclasses.replace(spec.options, opt_level=level))


@dataclass
class _Job:
    """What one compilation works with: settings, target, key, toolchain, disk cache, dumps and stage clock."""

    settings: Knobs
    target: Target
    key: str
    tileiras: Toolchain | None
    disk: DiskCache | None
    dumper: Dumper
    clock: Clock = field(default_factory=Clock)
    cache: bool = True
    need_cubin: bool = True

    @classmethod
    def start(
        cls, settings: Knobs, target: Target, key: str, *, cache: bool, stem: str, need_cubin: bool = True
    ) -> _Job:
        tileiras = None if target.is_cpu else _find_toolchain(settings)
        disk = (
            DiskCache(settings.cache_dir, settings.cache_size, shared=settings.cache_shared)
            if cache and settings.cache_dir is not None
            else None
        )
        dumper = Dumper(settings.dump, settings.dump_dir, stem)
        return cls(settings, target, key, tileiras, disk, dumper, cache=cache, need_cubin=need_cubin)

    @property
    def suffix(self) -> str | None:
        """What completes the frontend key of a disk entry: the tileiras fingerprint ("cpu" for no cubin)."""
        return "cpu" if self.target.is_cpu else self.tileiras.fingerprint if self.tileiras is not None else None

    def require_tileiras(self, name: str) -> Toolchain | None:
        if self.tileiras is not None or self.target.is_cpu or not self.need_cubin:
            return self.tileiras
        folder = self.settings.cache_dir if self.cache else None
        where = f" and TILE_CACHE_DIR={folder} holds no precompiled entry for it" if folder else ""
        ahead = (
            f"; or compile ahead where tileiras is installed (`tile compile FILE.py::{name} --arch {self.target} "
            "--cache-dir DIR`), carry DIR here and set TILE_CACHE_DIR=DIR"
            if self.cache
            else ""
        )
        raise TileirasNotFoundError(
            f"cannot compile kernel {name!r} for {self.target} to a cubin: tileiras was not found{where}. "
            f"To fix it, {INSTALL_HINT}; or run on the CPU interpreter (TILE_INTERPRET=1, or `tile compile --arch "
            f"cpu`; `--emit ir,bytecode` needs no cubin){ahead}"
        )

    def finish(self, front: Frontend, options: CompileOptions) -> CompiledKernel:
        """Run the back half on ``front`` and assemble the result."""
        cubin, origin, cubin_key = None, "compiled", None
        if self.tileiras is not None and not self.target.is_cpu:
            folder = self.settings.cache_dir
            keep = folder / "failed" if folder is not None else self.settings.dump_dir
            cubin, hit, cubin_key = run_backend(
                front,
                target=self.target,
                options=options,
                tileiras=self.tileiras,
                disk=self.disk,
                dumper=self.dumper,
                clock=self.clock,
                keep_dir=keep,
            )
            origin = "disk" if hit else origin
        return CompiledKernel(
            name=front.name,
            abi=front.abi,
            target=self.target,
            bytecode=front.bytecode,
            bytecode_version=front.version,
            cubin=cubin,
            key=self.key,
            tileiras_version=self.tileiras.version if cubin is not None and self.tileiras else None,
            origin=origin,
            timings=dict(self.clock.seconds),
            cubin_key=cubin_key,
        )


def _stem(fn: Callable[..., object], key: str) -> str:
    return f"{getattr(fn, '__name__', 'kernel')}-{key[:8]}"


def _load_or_build(
    fn: Callable[..., object], spec: Specialization, target: Target, key: str, settings: Knobs
) -> CompiledKernel:
    job = _Job.start(settings, target, key, cache=True, stem=_stem(fn, key))
    if job.disk is None:
        return _build(fn, spec, job)
    if (kernel := _lookup(job)) is not None:
        return kernel
    with job.disk.building(key):
        if (kernel := _lookup(job)) is not None:  # another process built it while this one waited
            return kernel
        kernel = _build(fn, spec, job)
        job.disk.put("kernel", f"{key}-{job.suffix}", _entry_meta(kernel), {"bytecode": kernel.bytecode})
    return kernel


def _lookup(job: _Job) -> CompiledKernel | None:
    """The kernel from the disk cache (by frontend key, any tileiras when there is none here), or None."""
    assert job.disk is not None
    with job.clock.stage("cache"):
        entry = (
            job.disk.get("kernel", f"{job.key}-{job.suffix}") if job.suffix else job.disk.find("kernel", f"{job.key}-")
        )
        kernel = _from_entry(entry, job.key, job) if entry is not None else None
    if kernel is not None:
        count("disk_hits")
    return kernel


def _find_toolchain(settings: Knobs) -> Toolchain | None:
    try:
        return toolchain(settings)
    except TileirasNotFoundError:
        return None


def _build(fn: Callable[..., object], spec: Specialization, job: _Job) -> CompiledKernel:
    tileiras = job.require_tileiras(getattr(fn, "__qualname__", repr(fn)))
    version = choose_version(job.settings.bytecode_version, tileiras)
    count("frontend_runs")
    front = run_frontend(fn, spec, job.target, version=version, dumper=job.dumper, clock=job.clock)
    return job.finish(front, spec.options)


def _entry_meta(kernel: CompiledKernel) -> dict[str, Any]:
    return {
        "name": kernel.name,
        "abi": kernel.abi.to_json(),
        "arch": kernel.target.arch,
        "bytecode_version": list(kernel.bytecode_version),
        "tileiras": kernel.tileiras_version,
        "cubin_key": kernel.cubin_key,
        "timings": dict(kernel.timings),
    }


def _from_entry(entry: CacheEntry, key: str, job: _Job) -> CompiledKernel | None:
    """The kernel of a frontend-keyed entry; its cubin lives once, in the bytecode-keyed store (None if evicted)."""
    meta = entry.meta
    try:
        cubin_key = meta.get("cubin_key")
        cubin = None
        if cubin_key is not None:
            found = job.disk.get("cubin", str(cubin_key)) if job.disk is not None else None
            if found is None:
                return None
            cubin = found.blobs["cubin"]
        major, minor = meta["bytecode_version"]
        return CompiledKernel(
            name=str(meta["name"]),
            abi=KernelABI.from_json(meta["abi"]),
            target=job.target,
            bytecode=entry.blobs["bytecode"],
            bytecode_version=(int(major), int(minor)),
            cubin=cubin,
            key=key,
            tileiras_version=meta.get("tileiras"),
            origin="disk",
            timings=dict(job.clock.seconds),
            cubin_key=cubin_key,
        )
    except (KeyError, TypeError, ValueError):
        return None


def compile_module(
    module: Module,
    target: Target | str = "sm_90",
    *,
    abi: KernelABI | None = None,
    options: CompileOptions | None = None,
    cache: bool = True,
    settings: Knobs | None = None,
) -> CompiledKernel:
    """Compile a Tile IR module built directly (one entry): verify → bytecode → tileiras (cached by bytecode)."""
    settings = settings or knobs()
    target = target if isinstance(target, Target) else Target(target)
    function = module.functions[0]
    slots = tuple(AbiSlot(f"arg{i}", "value", -1, str(t)) for i, t in enumerate(function.type.inputs))
    job = _Job.start(settings, target, "", cache=cache, stem=function.name)
    tileiras = job.require_tileiras(function.name)
    version = choose_version(settings.bytecode_version, tileiras)
    front = finish_module(module, abi or KernelABI(function.name, slots), version, job.dumper, job.clock)
    job.key = hashlib.sha256(front.bytecode).hexdigest()
    return job.finish(front, options or CompileOptions(opt_level=settings.opt_level))


def compile_bytecode(
    bytecode: bytes,
    target: Target | str = "sm_90",
    *,
    name: str | None = None,
    options: CompileOptions | None = None,
    cache: bool = True,
    settings: Knobs | None = None,
) -> CompiledKernel:
    """Compile Tile IR bytecode (ours or another producer's, e.g. cuTile Python's) to a cubin with tileiras.

    ``name`` labels the result (file names, messages); the entry symbol is read from the bytecode.
    """
    settings = settings or knobs()
    target = target if isinstance(target, Target) else Target(target)
    if target.is_cpu:
        raise SpecError("compile_bytecode makes a cubin; pass a GPU target such as 'sm_90'")
    toolchain(settings)  # raises TileirasNotFoundError with the install hint
    version = (bytecode[8], bytecode[9]) if len(bytecode) >= 12 and bytecode[:8] == b"\x7fTileIR\x00" else (0, 0)
    entry = _entry_name(bytecode)
    job = _Job.start(settings, target, hashlib.sha256(bytecode).hexdigest(), cache=cache, stem=name or entry)
    return job.finish(
        Frontend(name or entry, Module(), KernelABI(entry), bytes(bytecode), version),
        options or CompileOptions(opt_level=settings.opt_level),
    )


def _entry_name(bytecode: bytes) -> str:
    import tile.ir

    try:
        functions = tile.ir.read_bytecode(bytecode).functions
    except tile.ir.TileError:  # not bytecode we can read: tileiras will say why; the name is only a label
        return "kernel"
    return functions[0].name if functions else "kernel"
