"""Cache keys: what identifies a compiled kernel, computed without parsing it.

The frontend key must be cheap (a disk-cache hit, key included, targets < 2 ms) and must change whenever the
generated code could: it hashes the key schema, the content of the installed tile.compiler and tile.ir sources
(so a development edit or an upgrade invalidates old entries), the kernel's qualified name, the content of every
user source file reachable from the kernel's globals and closure, what the kernel and its helpers read from globals,
closures and modules at compile time (values by value, code by name: `Captures.key`), ``__tile_*`` attributes, the
specialization, the target and the bytecode-version policy. Extents never enter it.

Nothing machine-specific enters it: no paths, mtimes, module names (the CLI imports a file under another name
than the application does) or Python version (the GPU machine runs another one). So a cache filled ahead of time
by ``tile compile`` on one machine is hit by the same tree on another.

Limitation (stated, not hidden): a user helper reached only through an attribute of a non-module object is not
followed; its file is hashed only if the kernel's own file or a referenced user module contains it.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sysconfig
import types
from collections.abc import Callable, Iterator
from pathlib import Path

from ._cache import KEY_SCHEMA
from ._captures import Captures, captures, value_key
from ._spec import Specialization, Target

__all__ = ["cubin_key", "frontend_key", "source_fingerprint", "toolkit_fingerprint"]

_INSTALLED = re.compile(r"[/\\](site|dist)-packages[/\\]")
_SIMPLE = (int, float, bool, str, bytes, type(None), complex)  # __tile_* attributes hashed
_LIBRARY_ROOTS = tuple(
    {str(Path(sysconfig.get_paths()[k]).resolve()) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)


def frontend_key(
    fn: Callable[..., object],
    spec: Specialization,
    target: Target,
    version: tuple[int, int] | None,
    snapshot: Captures | None = None,
) -> str:
    """Hex SHA-256 identifying the code of ``fn`` compiled with ``spec`` for ``target`` (see the module doc), its
    compile-time reads those of ``snapshot`` (the reads the compile is pinned to; default: read now)."""
    h = hashlib.sha256(b"tile-frontend\0%d\0" % KEY_SCHEMA)
    h.update(toolkit_fingerprint().encode())
    h.update(source_fingerprint(fn).encode())
    h.update((snapshot if snapshot is not None else captures(fn)).key() + b"\0")
    for part in (spec.key(), target.key(), repr(version).encode()):
        h.update(b"%d\0" % len(part) + part)
    return h.hexdigest()


def cubin_key(
    bytecode: bytes, *, version: tuple[int, int], arch: str, opt_level: int, lineinfo: bool, tileiras: str
) -> str:
    """Hex SHA-256 of what decides a cubin: bytecode, its version, arch, options and the tileiras fingerprint."""
    h = hashlib.sha256(b"tile-cubin\0%d\0" % KEY_SCHEMA)
    for part in (
        bytecode,
        b"%d.%d" % version,
        arch.encode(),
        b"O%d%s" % (opt_level, b"l" * lineinfo),
        tileiras.encode(),
    ):
        h.update(b"%d\0" % len(part) + part)
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def toolkit_fingerprint() -> str:
    """Content hash of the tile.compiler and tile.ir sources in use (computed once per process)."""
    import tile.ir

    h = hashlib.sha256()
    for root in (Path(__file__).parent, Path(tile.ir.__file__).parent):
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def source_fingerprint(fn: Callable[..., object]) -> str:
    """Hash of the user code ``fn`` can reach (see the module docstring)."""
    h = hashlib.sha256(f"{getattr(fn, '__qualname__', '')}\0".encode())
    files: set[str] = set()
    pending, seen = [_unwrap(fn)], set()
    while pending:
        func = pending.pop()
        if func is None or id(func) in seen:
            continue
        seen.add(id(func))
        h.update(_tile_attributes(func))
        _add_file(h, files, func.__code__)
        for name, value in _referenced(func):
            if (text := value_key(value)) is not None:
                h.update(f"{name}={text}\0".encode())
            elif isinstance(value, types.ModuleType):
                if (file := getattr(value, "__file__", None)) and _is_user_file(file):
                    h.update(f"module {name}\0".encode() + _file_digest(file))
            elif (target := _unwrap(value)) is not None and _is_user_file(target.__code__.co_filename):
                h.update(f"function {name}={target.__qualname__}\0".encode())  # `f = g` in one file changes it
                pending.append(target)
    return h.hexdigest()


def _unwrap(value: object) -> types.FunctionType | None:
    for _ in range(8):
        if isinstance(value, types.FunctionType):
            return value
        inner = getattr(value, "__wrapped__", None)
        if inner is None:
            return None
        value = inner
    return None


def _tile_attributes(func: types.FunctionType) -> bytes:
    attrs = sorted((k, v) for k, v in vars(func).items() if k.startswith("__tile") and isinstance(v, _SIMPLE))
    return repr(attrs).encode()


def _referenced(func: types.FunctionType) -> Iterator[tuple[str, object]]:
    names: set[str] = set()
    for code in _code_objects(func.__code__):
        names.update(code.co_names)
    for name in sorted(names):
        if name in func.__globals__:
            yield name, func.__globals__[name]
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or (), strict=False):
        try:
            yield name, cell.cell_contents
        except ValueError:  # an empty cell: the closure variable is not bound yet
            continue


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _add_file(h: hashlib._Hash, files: set[str], code: types.CodeType) -> None:
    if code.co_filename in files:
        return
    files.add(code.co_filename)
    digest = _file_digest(code.co_filename)
    # Code without a readable file (REPL, exec) is identified by its bytecode and constants instead.
    h.update(digest or repr([(c.co_code, c.co_consts, c.co_names) for c in _code_objects(code)]).encode())


def _file_digest(filename: str) -> bytes:
    path = Path(filename)
    try:
        stat = path.stat()
    except OSError:
        return b""
    return _digest_of(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=512)
def _digest_of(path: str, size: int, mtime_ns: int) -> bytes:
    try:
        return hashlib.sha256(Path(path).read_bytes()).digest()
    except OSError:
        return b""


@functools.lru_cache(maxsize=1024)
def _is_user_file(filename: str) -> bool:
    if filename.startswith("<"):
        return True
    import tile

    # The Tile packages themselves are covered by toolkit_fingerprint (tile.ir, tile.compiler) or emit no code.
    tile_roots = tuple(str(Path(p).resolve()) for p in tile.__path__)
    resolved = str(Path(filename).resolve())
    return not resolved.startswith(_LIBRARY_ROOTS + tile_roots) and not _INSTALLED.search(resolved)
