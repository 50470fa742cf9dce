"""The ``tile-ir`` command line: ``dis``, ``asm``, ``verify`` and ``info`` over Tile IR files.

Exit codes: 0 success; 1 the input is not valid (bytecode, text or IR), with one ``tile-ir: error: ...``
message on stderr; 2 a usage error (argparse's convention); 3 a file could not be read or written.
``verify`` and ``info`` take bytecode or text (bytecode is recognised by its magic number).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from tile.ir._asm import parse_module
from tile.ir._decoding import ByteReader
from tile.ir._errors import TileError
from tile.ir._ir import Module
from tile.ir._lexer import AsmSyntaxError
from tile.ir._printer import print_module
from tile.ir._reader import read_bytecode, read_version
from tile.ir._verifier import verify_problems
from tile.ir._version import LATEST, SUPPORTED_VERSIONS, Version
from tile.ir._writer import write_bytecode

__all__ = ["main"]

MAGIC = b"\x7fTileIR\x00"
_SECTION_NAMES = {1: "string", 2: "func", 3: "debug", 4: "constant", 5: "type", 6: "global", 7: "producer"}
EXIT_INVALID, EXIT_USAGE, EXIT_IO = 1, 2, 3


class _IOFailureError(TileError, OSError):
    """A file could not be read or written (exit code 3)."""


def _read(path: str) -> bytes:
    try:
        return sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise _IOFailureError(f"cannot read {path}: {exc.strerror or exc}") from None


def _write(path: str | None, data: bytes) -> None:
    try:
        if path is None or path == "-":
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        else:
            Path(path).write_bytes(data)
    except OSError as exc:
        raise _IOFailureError(f"cannot write {path}: {exc.strerror or exc}") from None


def _load(path: str) -> tuple[Module, Version | None]:
    """A module from bytecode (with its version) or from text (version None)."""
    data = _read(path)
    if data.startswith(MAGIC):
        return read_bytecode(data), read_version(data)
    return parse_module(data.decode("utf-8", errors="replace"), path), None


def _version(text: str) -> Version:
    for v in SUPPORTED_VERSIONS:
        if str(v) == text:
            return v
    choices = ", ".join(map(str, SUPPORTED_VERSIONS))
    raise argparse.ArgumentTypeError(f"unsupported bytecode version '{text}' (choose from {choices})")


def _problems(path: str, module: Module, version: Version) -> bool:
    """Print every verifier problem of `module`; True if there was one."""
    problems = verify_problems(module, version)
    for problem in problems:
        print(f"{path}: error: {problem}", file=sys.stderr)
    return bool(problems)


def _cmd_dis(args: argparse.Namespace) -> int:
    data = _read(args.file)
    module = read_bytecode(data)
    # like tileirdisasm, refuse to print IR that does not verify (unless asked to print it anyway)
    if args.verify and _problems(args.file, module, read_version(data)):
        return EXIT_INVALID
    _write(args.output, print_module(module, debug=args.debug).encode())
    return 0


def _cmd_asm(args: argparse.Namespace) -> int:
    text = _read(args.file).decode("utf-8", errors="replace")
    module = parse_module(text, args.file)
    if args.verify and _problems(args.file, module, args.version):
        return EXIT_INVALID
    _write(args.output, write_bytecode(module, args.version))
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    module, version = _load(args.file)
    if _problems(args.file, module, version or args.version):
        return EXIT_INVALID
    print(f"{args.file}: ok ({len(module.functions)} function(s), version {version or args.version})")
    return 0


def _sections(data: bytes) -> list[tuple[str, int, int]]:
    """(name, payload offset, payload size) of each section, in file order."""
    r = ByteReader(data, 12)
    out: list[tuple[str, int, int]] = []
    while (head := r.byte("section header")) != 0:
        size = r.varint("section length")
        if head & 0x80:
            align = r.varint("section alignment")
            while align > 1 and r.pos % align:
                r.byte("padding")
        out.append((_SECTION_NAMES.get(head & 0x7F, f"unknown({head & 0x7F})"), r.pos, size))
        r.take(size, "section payload")
    return out


def _cmd_info(args: argparse.Namespace) -> int:
    data = _read(args.file)
    lines: list[str] = []
    if data.startswith(MAGIC):
        module = read_bytecode(data)
        lines.append(f"version: {read_version(data)}  ({len(data)} bytes)")
        lines.append("sections:")
        lines += [f"  {name:<9} offset {off:>7}  size {size:>7}" for name, off, size in _sections(data)]
    else:
        module = parse_module(data.decode("utf-8", errors="replace"), args.file)
        lines.append("version: (text input)")
    if module.producer:
        lines.append(f"producer: {module.producer}")
    lines.append(f"globals: {len(module.globals)}")
    lines.append(f"functions: {len(module.functions)}")
    histogram: Counter[str] = Counter()
    for fn in module.functions:
        ops = [op.name for op in fn.walk()]
        histogram.update(ops)
        lines.append(f"  @{fn.name}: {len(fn.params)} params, {len(ops)} ops")
    lines.append("ops:")
    lines += [f"  {count:>6}  {name}" for name, count in sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))]
    print("\n".join(lines))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tile-ir", description="Tile IR bytecode and text tools.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_installed_version('tile-ir')}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    dis = sub.add_parser("dis", help="print bytecode as text (what tileirdisasm prints)")
    dis.add_argument("file", help="bytecode file ('-' for stdin)")
    dis.add_argument("-o", "--output", help="write the text here (default: stdout)")
    dis.add_argument("--no-verify", dest="verify", action="store_false", help="print even if the IR does not verify")
    dis.add_argument("-g", "--debug", action="store_true", help="print locations (as tileirdisasm -g)")
    dis.set_defaults(run=_cmd_dis)
    asm = sub.add_parser("asm", help="assemble text into bytecode")
    asm.add_argument("file", help="text file ('-' for stdin)")
    asm.add_argument("-o", "--output", required=True, help="bytecode file to write ('-' for stdout)")
    asm.add_argument("--version", type=_version, default=LATEST, help=f"bytecode version (default {LATEST})")
    asm.add_argument("--no-verify", dest="verify", action="store_false", help="write even if the IR does not verify")
    asm.set_defaults(run=_cmd_asm)
    ver = sub.add_parser("verify", help="check a bytecode or text file; exit 1 listing every problem")
    ver.add_argument("file")
    ver.add_argument("--version", type=_version, default=LATEST, help="version to check text input against")
    ver.set_defaults(run=_cmd_verify)
    info = sub.add_parser("info", help="version, sections, functions and an op histogram")
    info.add_argument("file")
    info.set_defaults(run=_cmd_info)
    return parser


def _installed_version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed: running from a source tree)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tile-ir`` command line; returns the exit code (141, as for SIGPIPE, when stdout was closed)."""
    try:
        try:
            return _main(argv)
        finally:  # a closed pipe fails here, inside the handler, not at interpreter exit (--help's SystemExit too)
            sys.stdout.flush()
    except BrokenPipeError:  # `tile-ir dis f | head`: the reader left; say nothing more, as a shell tool would
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit-time flush must not fail again
        return 141


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except _IOFailureError as exc:
        print(f"tile-ir: error: {exc}", file=sys.stderr)
        return EXIT_IO
    except AsmSyntaxError as exc:
        print(exc, file=sys.stderr)  # already "file:line:col: error: ..." with the caret
        return EXIT_INVALID
    except TileError as exc:
        print(f"tile-ir: error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    return code
