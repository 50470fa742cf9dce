"""The ordered, named compile stages: parse → resolve → typecheck → lower → verify → bytecode → cubin.

`run_frontend` runs the first six (COMP's stage functions, then tile.ir's verifier and writer), `run_backend` the
last (``tileiras`` behind the bytecode-keyed disk cache). Each stage is timed into a `Clock` and dumped through
a `Dumper` when ``TILE_DUMP`` names it. `choose_version` picks the bytecode version: ``TILE_BYTECODE_VERSION``
if set (it must be one both our writer and tileiras read), else the highest both support.
Invariant: the stage list is `STAGES`, in this order; nothing here caches by the frontend key (that is
`_api`'s job), so every call runs the stages it is asked to.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tile.ir import SUPPORTED_VERSIONS, Module, Version

from ._cache import DiskCache, count
from ._dump import Dumper
from ._fingerprint import cubin_key
from ._spec import CompileOptions, KernelABI, SpecError, Specialization, Target
from ._toolchain import Toolchain, ToolchainError

__all__ = [
    "STAGES",
    "Clock",
    "Frontend",
    "Stage",
    "choose_version",
    "finish_module",
    "ir_text",
    "run_backend",
    "run_frontend",
]

STAGES = ("parse", "resolve", "typecheck", "lower", "verify", "bytecode", "cubin")
"""Stage names in order: the front stages (`run_frontend`, a `Stage` table) then ``cubin`` (`run_backend`)."""


@dataclass
class Clock:
    """Seconds spent per stage (plus ``cache`` for disk lookups), in the order they ran."""

    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as stage ``name`` (added to any earlier time of the same name)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


@dataclass(frozen=True)
class Frontend:
    """The front half's result: the Tile IR module, its entry ABI and its bytecode."""

    name: str
    module: Module
    abi: KernelABI
    bytecode: bytes
    version: tuple[int, int]


def choose_version(requested: tuple[int, int] | None, tileiras: Toolchain | None) -> tuple[int, int]:
    """Return the bytecode version to write (see the module docstring); raise if none works."""
    ours = {(v.major, v.minor) for v in SUPPORTED_VERSIONS}
    theirs = set(tileiras.bytecode_versions) if tileiras is not None else ours
    listed = ", ".join(f"{a}.{b}" for a, b in sorted(ours & theirs))
    if requested is not None:
        asked = "bytecode version {}.{} (TILE_BYTECODE_VERSION or --bytecode-version)".format(*requested)
        if requested not in ours:
            raise SpecError(f"{asked} is not one our writer supports; use one of {listed}")
        if requested not in theirs:
            raise ToolchainError(
                f"{asked} is not read by tileiras {tileiras.version if tileiras else ''}; use one of {listed} or "
                "upgrade nvidia-cuda-tileiras"
            )
        return requested
    if not ours & theirs:
        raise ToolchainError(
            f"tileiras reads bytecode {sorted(theirs)} and our writer {sorted(ours)}: no common "
            "version; install a matching nvidia-cuda-tileiras"
        )
    return max(ours & theirs)


def ir_text(module: Module) -> str:
    """The module in the text syntax ``tileirdisasm`` prints."""
    import tile.ir

    return tile.ir.print_module(module)


@dataclass(frozen=True)
class _Job:
    """What the front stages read besides their input."""

    spec: Specialization
    target: Target
    version: Version


@dataclass(frozen=True)
class _Built:
    """A lowered kernel as the verify and bytecode stages see it (COMP's `LoweredKernel` has the same fields)."""

    module: Module
    abi: KernelABI


def _front_stages() -> tuple[Stage, ...]:
    import tile.ir

    from ._lower import lower
    from ._parse import parse
    from ._resolve import resolve
    from ._typecheck import typecheck

    def verify(built: Any, job: _Job) -> Any:
        tile.ir.verify(built.module, job.version)
        return built

    return (
        Stage("parse", lambda fn, job: parse(fn), "ast", lambda tree: tree.dump()),
        Stage("resolve", lambda tree, job: resolve(tree), "resolved", lambda resolved: resolved.dump()),
        Stage(
            "typecheck",
            lambda r, job: typecheck(r, job.spec, job.target, (job.version.major, job.version.minor)),
            "typed",
            lambda typed: typed.dump(),
        ),
        Stage("lower", lambda typed, job: lower(typed, job.target), "ir", lambda built: ir_text(built.module)),
        Stage("verify", verify),
        Stage("bytecode", lambda built, job: bytes(tile.ir.write_bytecode(built.module, job.version)), "bytecode"),
    )


@dataclass(frozen=True)
class Stage:
    """One named step of the pipeline: ``run(input, job) -> output``, dumped as ``dump`` by ``render``.

    A stage whose ``render`` is None dumps its output as is (bytes go to a file); one without ``dump`` is not dumped.
    """

    name: str
    run: Callable[[Any, Any], Any]
    dump: str | None = None
    render: Callable[[Any], str] | None = None


def _run(stages: tuple[Stage, ...], value: Any, job: _Job, dumper: Dumper, clock: Clock) -> dict[str, Any]:
    outputs: dict[str, Any] = {}
    for stage in stages:
        with clock.stage(stage.name):
            value = outputs[stage.name] = stage.run(value, job)
        if stage.dump is None:
            continue
        if stage.render is not None:
            dumper.text(stage.dump, functools.partial(stage.render, value))
        else:
            dumper.binary(stage.dump, value)
    return outputs


def run_frontend(
    fn: Callable[..., object],
    spec: Specialization,
    target: Target,
    *,
    version: tuple[int, int],
    dumper: Dumper,
    clock: Clock,
) -> Frontend:
    """Run parse → resolve → typecheck → lower → verify → bytecode on ``fn``."""
    out = _run(_front_stages(), fn, _Job(spec, target, Version(*version)), dumper, clock)
    lowered = out["lower"]
    return Frontend(lowered.abi.entry, lowered.module, lowered.abi, out["bytecode"], version)


def finish_module(module: Module, abi: KernelABI, version: tuple[int, int], dumper: Dumper, clock: Clock) -> Frontend:
    """Run verify → bytecode on a built module (the back half's entry for modules built without the frontend)."""
    stages = _front_stages()
    dumper.text("ir", lambda: ir_text(module))
    job = _Job(Specialization(), Target.cpu(), Version(*version))
    out = _run(stages[[s.name for s in stages].index("verify") :], _Built(module, abi), job, dumper, clock)
    return Frontend(abi.entry, module, abi, out["bytecode"], version)


def run_backend(
    front: Frontend,
    *,
    target: Target,
    options: CompileOptions,
    tileiras: Toolchain,
    disk: DiskCache | None,
    dumper: Dumper,
    clock: Clock,
    keep_dir: Path | None = None,
) -> tuple[bytes, bool, str]:
    """Return ``(cubin, from_disk, key)`` for ``front.bytecode``: from the disk cache, or by running tileiras."""
    key = cubin_key(
        front.bytecode,
        version=front.version,
        arch=target.arch,
        opt_level=options.opt_level,
        lineinfo=options.lineinfo,
        tileiras=tileiras.fingerprint,
    )
    with clock.stage("cache"):
        entry = disk.get("cubin", key) if disk is not None else None
    if entry is not None and "cubin" in entry.blobs:
        count("cubin_disk_hits")
        cubin, hit = entry.blobs["cubin"], True
    else:
        with clock.stage("cubin"):
            cubin = tileiras.compile(
                front.bytecode,
                kernel=front.name,
                arch=target.arch,
                opt_level=options.opt_level,
                lineinfo=options.lineinfo,
                keep_dir=keep_dir,
            )
        count("tileiras_runs")
        hit = False
        if disk is not None:
            meta = {"kernel": front.name, "arch": target.arch, "tileiras": tileiras.version}
            disk.put("cubin", key, meta, {"cubin": cubin})
    dumper.binary("cubin", cubin)
    return cubin, hit, key
