"""The ``tile`` command line (compile-only, no GPU needed).

``tile compile FILE.py::KERNEL --arch sm_90 --emit ir|bytecode|cubin|all --const B=128 --dtype x=f16 -o DIR``
compiles a kernel through the whole pipeline (``FILE.tilebc`` instead runs only tileiras); ``--shape x=1024x512``
gives a tensor's extents so that the specialization is the one a launch with such tensors computes (`specialize`).
The results also land in the disk cache, which is how kernels are compiled ahead for a GPU machine without
tileiras (``--cache-dir DIR``, then ``TILE_CACHE_DIR=DIR`` there).
``tile toolchain`` reports the tileiras in use; ``tile cache info|list|clear`` inspects or empties the disk cache.
Exit status: 0 success, 1 the kernel or the toolchain failed (the message says why), 2 bad usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import importlib.util
import os
import re
import sys
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO, TypeVar

from tile.ir import TileError

from ._api import compile_bytecode, compile_kernel
from ._cache import DiskCache
from ._compiled import CompiledKernel
from ._knobs import DUMP_STAGES, Knobs, knobs
from ._pipeline import choose_version
from ._spec import CompileOptions, Specialization, Target
from ._specialize import specialize

__all__ = ["UsageError", "main"]

_EMITS = ("ir", "bytecode", "cubin")
T = TypeVar("T")


class UsageError(TileError, ValueError):
    """A command line that cannot be carried out as written (exit status 2)."""


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the ``tile`` command with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    A closed standard output (``tile cache list | head``) ends the command quietly with status 141, as SIGPIPE would.
    """
    try:
        try:
            return _main(argv, out or sys.stdout)
        finally:  # a closed pipe fails here, inside the handler, not at interpreter exit (--help's SystemExit too)
            sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit-time flush must not fail again
        return 141


def _main(argv: Sequence[str] | None, out: TextIO) -> int:
    args = _parser().parse_args(argv)
    try:
        handler: Callable[[argparse.Namespace, TextIO], int] = args.handler
        return handler(args, out)
    except UsageError as exc:
        print(f"tile {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # stdout's reader left: not an error of the command (see main)
        raise
    except (TileError, OSError) as exc:
        if knobs().debug:
            raise
        print(f"tile {args.command}: error: {exc}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tile", description="Compile Tile kernels ahead of time (no GPU needed).")
    parser.add_argument("--version", action="version", version=f"%(prog)s (tile-compiler) {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    comp = commands.add_parser("compile", help="compile FILE.py::KERNEL (or FILE.tilebc) to IR, bytecode and cubin")
    comp.add_argument("source", help="FILE.py::KERNEL, or a Tile IR bytecode file")
    comp.add_argument(
        "--arch",
        default="sm_90",
        help="GPU architecture (sm_80 ... sm_121), several comma-joined, or 'cpu' (default sm_90)",
    )
    comp.add_argument(
        "--emit", action="append", default=[], help="ir, bytecode, cubin or all (the default); repeat or comma-join"
    )
    comp.add_argument(
        "--const", action="append", default=[], metavar="NAME=VALUE", help="a const generic / Const param"
    )
    comp.add_argument("--dtype", action="append", default=[], metavar="NAME=DTYPE", help="dtype of a parameter/generic")
    comp.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=D0xD1",
        help="a tensor's extents, e.g. x=1024x512; give every tensor to get the key a launch computes",
    )
    comp.add_argument("-o", "--output", default=".", help="output folder (default: the current one); '-': IR to stdout")
    comp.add_argument("-O", "--opt-level", type=int, choices=range(4), default=None, help="tileiras optimisation level")
    comp.add_argument("--no-lineinfo", action="store_true", help="omit line information from the cubin")
    comp.add_argument("--occupancy", type=int, help="occupancy hint (1-32)")
    comp.add_argument("--num-cta-in-cga", type=int, help="CTAs per cluster hint (1, 2, 4, 8, 16)")
    comp.add_argument(
        "--any-grid",
        action="store_true",
        help="compile tiles() walks for any launch grid, as kernel.grid(g) launches get (default: the outputs' own "
        "tile grid, one block per tile, as a launch without .grid())",
    )
    comp.add_argument("--bytecode-version", help="bytecode version to write, e.g. 13.3 (default: the highest usable)")
    comp.add_argument("--cache-dir", help="disk cache folder to use and fill (default TILE_CACHE_DIR)")
    comp.add_argument("--no-cache", action="store_true", help="run every stage; read and write no cache")
    comp.add_argument("--dump", default="", help=f"stages to dump to stderr: {','.join(DUMP_STAGES)} or all")
    comp.set_defaults(handler=_compile)
    tool = commands.add_parser("toolchain", help="show the tileiras in use and the bytecode versions")
    tool.set_defaults(handler=_toolchain)
    cache = commands.add_parser("cache", help="inspect or empty the disk cache")
    cache.add_argument("action", choices=("info", "list", "clear"), help="summary, every entry, or empty it")
    cache.add_argument("--cache-dir", help="the cache folder (default TILE_CACHE_DIR)")
    cache.set_defaults(handler=_cache)
    return parser


def _version() -> str:
    try:
        return importlib.metadata.version("tile-compiler")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed: running from a source tree)"


def _settings(args: argparse.Namespace) -> Knobs:
    env = knobs()
    changes: dict[str, object] = {}
    if getattr(args, "cache_dir", None):
        changes["cache_dir"] = Path(args.cache_dir)
    if getattr(args, "bytecode_version", None):
        match = re.fullmatch(r"(\d+)\.(\d+)", args.bytecode_version.strip())
        if match is None:
            raise UsageError(f"--bytecode-version takes MAJOR.MINOR such as 13.3, not {args.bytecode_version!r}")
        changes["bytecode_version"] = (int(match[1]), int(match[2]))
    if getattr(args, "dump", ""):
        changes["dump"] = knobs({"TILE_DUMP": args.dump}).dump
        changes["dump_dir"] = None
    return dataclasses.replace(env, **changes)  # type: ignore[arg-type]  # field names are checked by replace()


def _compile(args: argparse.Namespace, out: TextIO) -> int:
    emit = _emits(args.emit)
    if args.output == "-" and emit != ["ir"]:
        raise UsageError("-o - prints the Tile IR text; add --emit ir (bytecode and cubins go to a folder)")
    settings = _settings(args)
    opt_level = settings.opt_level if args.opt_level is None else args.opt_level
    options = CompileOptions(
        opt_level=opt_level, lineinfo=not args.no_lineinfo, occupancy=args.occupancy, num_cta_in_cga=args.num_cta_in_cga
    )
    targets = [Target(arch) for arch in args.arch.split(",") if arch.strip()]
    # One arch keeps plain file names; several get the arch in the name so their outputs do not collide.
    stem = "{name}.{arch}" if len(targets) > 1 else "{name}"
    if "::" not in args.source:
        data, label = Path(args.source).read_bytes(), Path(args.source).stem
        for target in targets:
            kernel = compile_bytecode(
                data, target, name=label, options=options, cache=not args.no_cache, settings=settings
            )
            _report(kernel, [e for e in emit if e != "ir"], Path(args.output), out, stem)
        return 0
    file, _, name = args.source.rpartition("::")
    consts, dtypes, shapes = (
        dict(_pairs(args.const, _value)),
        dict(_pairs(args.dtype, str)),
        _pairs(args.shape, _extents),
    )
    fn, unchecked = _load_kernel(Path(file), name)  # after checking the arguments: loading runs the user's module
    options = dataclasses.replace(options, unchecked=unchecked)
    spec = specialize(fn, dict(shapes), consts=consts, dtypes=dtypes, options=options, own_grid=not args.any_grid)
    if shapes and (missing := _tensors_without_facts(fn, spec)):
        print(f"note: no --shape for {', '.join(missing)}: a launch would specialize on them", file=sys.stderr)
    for target in targets:
        kernel = compile_kernel(fn, spec, target, cache=not args.no_cache, settings=settings, cubin="cubin" in emit)
        _report(kernel, emit, Path(args.output), out, stem)
    return 0


def _tensors_without_facts(fn: Callable[..., object], spec: Specialization) -> list[str]:
    from ._parse import parse
    from ._resolve import resolve

    params = resolve(parse(fn)).params
    return [p.name for p in params if p.kind in ("tensor", "mut") and spec.param(p.name) is None]


def _report(kernel: CompiledKernel, emit: list[str], folder: Path, out: TextIO, stem: str) -> None:
    if str(folder) == "-":
        out.write(kernel.ir_text())
        return
    for path in kernel.save(folder, tuple(emit), stem=stem.format(name=kernel.name, arch=kernel.target.arch)):
        print(f"wrote {path}", file=out)
    version = "{}.{}".format(*kernel.bytecode_version)
    stages = "  ".join(f"{stage} {seconds * 1e3:.1f} ms" for stage, seconds in kernel.timings.items())
    print(f"{kernel.name} for {kernel.target}: bytecode {version}, {kernel.origin}; {stages}", file=out)


def _emits(values: list[str]) -> list[str]:
    chosen = {v.strip() for value in values or ["all"] for v in value.split(",") if v.strip()}
    if "all" in chosen:
        return list(_EMITS)
    if unknown := chosen - set(_EMITS):
        raise UsageError(f"--emit takes ir, bytecode, cubin or all, not {', '.join(sorted(unknown))}")
    return [e for e in _EMITS if e in chosen]


def _pairs(items: list[str], convert: Callable[[str], T]) -> list[tuple[str, T]]:
    pairs: list[tuple[str, T]] = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"expected NAME=VALUE, got {item!r}")
        pairs.append((name.strip(), convert(value.strip())))
    return pairs


def _extents(text: str) -> tuple[int, ...]:
    try:
        extents = tuple(int(part) for part in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"a shape is written like 1024x512, not {text!r}") from None
    if any(n <= 0 for n in extents):
        raise UsageError(f"extents must be positive, got {text!r}")
    return extents


def _value(text: str) -> int | float | bool:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"const value {text!r} is not an int, float or bool") from None


def _load_kernel(file: Path, name: str) -> tuple[Callable[..., object], bool]:
    """The kernel function ``name`` of ``file``, and whether the kernel object wrapping it is marked unchecked."""
    if not file.is_file():
        raise UsageError(f"no such file: {file}")
    module_name = f"_tile_cli_{file.stem}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(file.resolve().parent))
    spec.loader.exec_module(module)
    value = getattr(module, name, None)
    unchecked = False
    while value is not None and not isinstance(value, types.FunctionType) and hasattr(value, "__wrapped__"):
        unchecked = unchecked or getattr(value, "unchecked", False) is True  # @tile.entry(unchecked=True)'s Kernel
        value = value.__wrapped__
    if not isinstance(value, types.FunctionType):
        raise UsageError(f"{file} has no kernel named {name!r}; {_kernels_in(module, module_name)}")
    return value, unchecked


def _kernels_in(module: types.ModuleType, module_name: str) -> str:
    """The kernels a user can name: the module's ``@tile.entry`` kernels (objects wrapping one of its functions)."""
    entries = [
        n
        for n, v in vars(module).items()
        if not isinstance(v, types.FunctionType)
        and isinstance(getattr(v, "__wrapped__", None), types.FunctionType)
        and v.__wrapped__.__module__ == module_name
    ]
    if entries:
        return f"its @tile.entry kernels: {', '.join(entries)}"
    functions = [
        n for n, v in vars(module).items() if isinstance(v, types.FunctionType) and v.__module__ == module_name
    ]
    return f"it has no @tile.entry kernel (plain functions: {', '.join(functions) or 'none'})"


def _toolchain(args: argparse.Namespace, out: TextIO) -> int:
    from ._toolchain import toolchain

    found = toolchain(_settings(args))
    print(f"tileiras:          {found.tileiras} (found by {found.found_by})", file=out)
    print(f"version:           {found.version}", file=out)
    print(f"fingerprint:       {found.fingerprint}", file=out)
    print(f"bytecode versions: {' '.join(f'{a}.{b}' for a, b in found.bytecode_versions)}", file=out)
    print("writing:           {}.{}".format(*choose_version(_settings(args).bytecode_version, found)), file=out)
    return 0


def _cache(args: argparse.Namespace, out: TextIO) -> int:
    settings = _settings(args)
    if settings.cache_dir is None:
        print("the disk cache is off (TILE_CACHE_DIR=off)", file=out)
        return 0
    store = DiskCache(settings.cache_dir, settings.cache_size, shared=settings.cache_shared)
    if args.action == "clear":
        print(f"removed {store.clear()} entries from {store.root}", file=out)
        return 0
    entries = sorted(store.entries(), key=lambda e: e.stat().st_mtime, reverse=True)
    size = sum(e.stat().st_size for e in entries)
    print(
        f"{store.root}: {len(entries)} entries, {size / 2**20:.1f} MiB of {settings.cache_size / 2**20:.0f} MiB",
        file=out,
    )
    if args.action == "list":
        for item in entries:
            entry = store.load(Path(item.path))
            meta = entry.meta if entry is not None else {"name": "(corrupt: evicted)"}
            kind = Path(item.path).parent.parent.name
            name, arch = meta.get("name", meta.get("kernel", "?")), meta.get("arch", "?")
            print(f"  {kind:6} {name:32} {arch:6} {item.stat().st_size / 1024:8.1f} KiB  {item.name[:16]}", file=out)
    return 0
