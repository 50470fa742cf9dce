"""Finding and running NVIDIA's ``tileiras`` assembler (Tile IR bytecode -> cubin).

Discovery order: ``TILE_TILEIRAS``, the pip package ``nvidia-cuda-tileiras`` (``nvidia/cu13/bin/tileiras``),
``PATH``, ``$CUDA_HOME/bin``. A found binary is probed once for ``--version`` (its fingerprint enters every cubin
cache key) and ``--list-versions``; the probe is remembered per process and, keyed by the binary's identity, in
the disk cache, so a warm process start pays no subprocess. tileiras always runs with the environment from
`tileiras_environment` (no foreign ``CUDA_HOME``). Every failure becomes a `TileirasError` naming the kernel, the
arch and the cause, with the input bytecode kept on disk for reproduction and a line on how to report it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import tile.bindings as tb
from tile.compiler._errors import TileError

from ._knobs import Knobs, knobs, tileiras_environment
from ._trust import UntrustedError, trusted_dir, warn_refused

__all__ = [
    "TileirasError",
    "TileirasNotFoundError",
    "Toolchain",
    "ToolchainError",
    "find_tileiras",
    "keep_failed_input",
    "toolchain",
]

# The toolchain is the `gpu` extra of tile-compiler and tile-frontend (the nvidia-cuda-tileiras distribution).
INSTALL_HINT = (
    "install it with `pip install 'tile-frontend[gpu]'` (or 'tile-compiler[gpu]'; either pulls nvidia-cuda-tileiras), "
    "or set TILE_TILEIRAS to the tileiras executable"
)
_REPORT = (
    "If the kernel is valid Tile code this is a bug in Tile or in tileiras: please open an issue in the Tile issue "
    "tracker attaching the bytecode file, this message and the output of `tile toolchain`."
)
# (stderr pattern, what it means and what to do), first match wins.
_CAUSES = (
    (
        "unsupported Tile IR bytecode version",
        "this tileiras cannot read the bytecode version we wrote; set "
        "TILE_BYTECODE_VERSION to one that `tileiras --list-versions` prints, or upgrade nvidia-cuda-tileiras",
    ),
    (
        "failed to compile Tile IR program",
        "tileiras could not finish code generation with its ptxas/libnvvm; they "
        "must be the ones shipped beside it (a foreign CUDA_HOME breaks this)",
    ),
    ("does not correspond to Tile IR bytecode", "tileiras rejected the input as malformed Tile IR bytecode"),
    ("preview feature", "the kernel uses a Tile IR preview feature this tileiras does not enable"),
)


class ToolchainError(TileError, RuntimeError):
    """The ``tileiras`` toolchain is missing, unusable, or does not support what was asked."""


class TileirasNotFoundError(ToolchainError, FileNotFoundError):
    """No ``tileiras`` executable was found."""


class TileirasError(ToolchainError):
    """``tileiras`` failed to compile a kernel.

    Parameters
    ----------
    kernel, arch
        What was being compiled, for which GPU.
    cause
        One line: what went wrong and what to do.
    returncode
        tileiras's exit status (negative: killed by that signal; None: timed out).
    stderr
        Its diagnostics.
    bytecode_path
        Where the input bytecode is kept for reproduction.
    command
        The command line that failed.
    """

    def __init__(  # noqa: PLR0917 - positional so that __reduce__ can rebuild it for pickling
        self, kernel: str, arch: str, cause: str, returncode: int | None, stderr: str, bytecode_path: str, command: str
    ) -> None:
        self.kernel, self.arch, self.cause, self.returncode = kernel, arch, cause, returncode
        self.stderr, self.bytecode_path, self.command = stderr, bytecode_path, command
        said = "\n".join(f"    {line}" for line in stderr.strip().splitlines()[-20:]) or "    (nothing)"
        super().__init__(
            f"tileiras failed to compile kernel {kernel!r} for {arch}: {cause}\n"
            f"  tileiras said:\n{said}\n"
            f"  The input bytecode is kept for reproduction: {bytecode_path}\n"
            f"  Reproduce with: {command}\n"
            f"  {_REPORT}"
        )

    def __reduce__(self) -> tuple[type[TileirasError], tuple[str, str, str, int | None, str, str, str]]:
        args = (self.kernel, self.arch, self.cause, self.returncode, self.stderr, self.bytecode_path, self.command)
        return (type(self), args)


@dataclass(frozen=True)
class Toolchain:
    """A probed ``tileiras``: where it is, how it was found, its version and the bytecode versions it reads."""

    tileiras: Path
    found_by: str
    version: str
    version_text: str
    bytecode_versions: tuple[tuple[int, int], ...]

    @property
    def root(self) -> Path:
        """The toolkit root (the folder above ``bin``)."""
        return self.tileiras.parent.parent

    @property
    def fingerprint(self) -> str:
        """A short digest of ``tileiras --version``: equal for equal builds of the assembler."""
        return hashlib.sha256(self.version_text.encode()).hexdigest()[:16]

    def command(self, source: Path, output: Path, *, arch: str, opt_level: int = 3, lineinfo: bool = True) -> list[str]:
        """The tileiras command line compiling ``source`` into ``output``."""
        flags = ["--lineinfo"] if lineinfo else []
        return [
            str(self.tileiras),
            "--gpu-name",
            arch,
            f"--opt-level={opt_level}",
            *flags,
            "-o",
            str(output),
            str(source),
        ]

    def compile(
        self,
        bytecode: bytes,
        *,
        kernel: str,
        arch: str,
        opt_level: int = 3,
        lineinfo: bool = True,
        timeout: float | None = None,
        keep_dir: Path | None = None,
    ) -> bytes:
        """Run tileiras on ``bytecode`` and return the cubin; raise `TileirasError` on any failure."""
        timeout = timeout or knobs().compile_timeout
        fail = functools.partial(self._failure, bytecode, kernel, arch, (opt_level, lineinfo), keep_dir)
        env = tileiras_environment(self.root)
        with tempfile.TemporaryDirectory(prefix="tile-tileiras-") as tmp:
            source, output = Path(tmp) / f"{_safe(kernel)}.tilebc", Path(tmp) / f"{_safe(kernel)}.cubin"
            source.write_bytes(bytecode)
            command = self.command(source, output, arch=arch, opt_level=opt_level, lineinfo=lineinfo)
            try:
                done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, check=False)
            except subprocess.TimeoutExpired as exc:
                stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
                raise fail(
                    None, stderr, f"timed out after {timeout:g} s; raise TILE_COMPILE_TIMEOUT if need be"
                ) from None
            if done.returncode != 0 or not output.is_file():
                raise fail(done.returncode, done.stderr + done.stdout, "")
            return output.read_bytes()

    def _failure(  # noqa: PLR0917 - bound once with functools.partial in compile(), then called with the outcome
        self,
        bytecode: bytes,
        kernel: str,
        arch: str,
        options: tuple[int, bool],
        keep_dir: Path | None,
        rc: int | None,
        stderr: str,
        cause: str,
    ) -> TileirasError:
        kept = keep_failed_input(bytecode, kernel, arch, keep_dir)
        repro = self.command(kept, kept.with_suffix(".cubin"), arch=arch, opt_level=options[0], lineinfo=options[1])
        home = tileiras_environment(self.root, {}).get("CUDA_HOME")
        command = f"env {'CUDA_HOME=' + home if home else '-u CUDA_HOME'} " + " ".join(repro)
        return TileirasError(kernel, arch, cause or _cause(rc, stderr), rc, stderr, str(kept), command)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:80] or "kernel"


def _cause(rc: int | None, stderr: str) -> str:
    if rc is not None and rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals.__members__.values() else str(-rc)
        return f"tileiras crashed (signal {name})"
    errors = [_located(line) for line in stderr.splitlines() if "error:" in line]
    meaning = next((meaning for pattern, meaning in _CAUSES if pattern in stderr), f"exit status {rc}")
    # The first error is the specific one; later lines only say that reading the module failed.
    return f"{errors[0]} ({meaning})" if errors and not any(p in errors[0] for p, _ in _CAUSES) else meaning


def _located(line: str) -> str:
    where, _, message = line.partition("error:")
    loc = re.search(r'"([^"]+)":(\d+):(\d+)', where)
    return f"{loc[1]}:{loc[2]}:{loc[3]}: {message.strip()}" if loc else message.strip()


def keep_failed_input(bytecode: bytes, kernel: str, arch: str, keep_dir: Path | None) -> Path:
    """Save ``bytecode`` that made tileiras fail and return its path (never raises for an unwritable folder)."""
    digest = hashlib.sha256(bytecode).hexdigest()[:12]
    name = f"{_safe(kernel)}-{arch}-{digest}.tilebc"
    # A per-user folder in the shared temporary folder: a /tmp/tile-failed another user made first (holding a link
    # named like our file, its name is predictable) must not make us write through it; trusted_dir refuses it.
    mine = f"tile-failed-{os.getuid()}" if hasattr(os, "getuid") else "tile-failed"
    for folder in (keep_dir, Path(tempfile.gettempdir()) / mine):
        if folder is None:
            continue
        try:
            with trusted_dir(folder, create=True) as where:
                where.write(name, bytecode)
            return folder / name
        except (OSError, UntrustedError):
            continue
    return Path(name)


def _candidates(settings: Knobs) -> list[tuple[Path, str]]:
    """The usable places after ``TILE_TILEIRAS``, in tile-bindings' order, under ``settings``."""
    environ = {"PATH": settings.path} | ({"CUDA_HOME": str(settings.cuda_home)} if settings.cuda_home else {})
    return [(c.path, c.source) for c in tb.tileiras_candidates(environ=environ) if c.usable]


def find_tileiras(settings: Knobs | None = None) -> tuple[Path, str]:
    """Return the ``tileiras`` to use and how it was found, or raise `TileirasNotFoundError`."""
    settings = settings or knobs()
    if settings.tileiras is not None:
        if settings.tileiras.is_file():
            return settings.tileiras.resolve(), "TILE_TILEIRAS"
        raise TileirasNotFoundError(
            f"TILE_TILEIRAS={settings.tileiras} is not a file; point it at tileiras or unset it"
        )
    if found := _candidates(settings):
        path, how = found[0]
        return path.resolve(), how
    raise TileirasNotFoundError(
        f"tileiras was not found (looked in the pip package, PATH and $CUDA_HOME/bin); {INSTALL_HINT}"
    )


_PROBED: dict[tuple[str, int, int], Toolchain] = {}
_MEMO_BYTES = 1 << 16  # a toolchain memo is a few hundred bytes
_PROBE_LOCK = threading.Lock()


def toolchain(settings: Knobs | None = None) -> Toolchain:
    """Find and probe ``tileiras`` (memoised per binary in this process and in the disk cache)."""
    settings = settings or knobs()
    path, how = find_tileiras(settings)
    stat = path.stat()
    identity = (str(path), stat.st_size, stat.st_mtime_ns)
    with _PROBE_LOCK:
        if (known := _PROBED.get(identity)) is not None:
            return known
        name = hashlib.sha256(repr(identity).encode()).hexdigest()[:24] + ".json"
        probed = _read_memo(settings, name, path, how) if settings.cache_dir is not None else None
        if probed is None:
            probed = _probe(path, how)
            if settings.cache_dir is not None:
                _write_memo(settings, name, probed)
        _PROBED[identity] = probed
        return probed


def _run(path: Path, flag: str) -> str:
    env = tileiras_environment(path.parent.parent)
    try:
        done = subprocess.run([str(path), flag], capture_output=True, text=True, env=env, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(f"could not run {path} {flag}: {exc}; {INSTALL_HINT}") from exc
    if done.returncode != 0:
        raise ToolchainError(
            f"`{path} {flag}` failed (exit status {done.returncode}): {done.stderr.strip()}; {INSTALL_HINT}"
        )
    return done.stdout


def _probe(path: Path, how: str) -> Toolchain:
    text = _run(path, "--version")
    match = re.search(r"V(\d+\.\d+\.\d+)", text) or re.search(r"release (\d+\.\d+)", text)
    versions = tuple(
        sorted((int(a), int(b)) for a, b in re.findall(r"^\s*(\d+)\.(\d+)\s*$", _run(path, "--list-versions"), re.M))
    )
    if not versions:
        raise ToolchainError(f"`{path} --list-versions` listed no bytecode version; {INSTALL_HINT}")
    return Toolchain(path, how, match[1] if match else "unknown", text.strip(), versions)


def _read_memo(settings: Knobs, name: str, path: Path, how: str) -> Toolchain | None:
    assert settings.cache_dir is not None
    try:  # the memo picks the bytecode version written: only a trusted one (see tile.compiler._trust)
        with trusted_dir(settings.cache_dir, ("toolchains",), shared=settings.cache_shared) as folder:
            raw = folder.read(name, _MEMO_BYTES)
        if raw is None:
            return None
        data = json.loads(raw)
        versions = tuple((int(a), int(b)) for a, b in data["bytecode_versions"])
        return Toolchain(path, how, str(data["version"]), str(data["version_text"]), versions)
    except UntrustedError as refused:
        warn_refused(refused)
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        pass
    return None


def _write_memo(settings: Knobs, name: str, probed: Toolchain) -> None:
    assert settings.cache_dir is not None
    data = {
        "version": probed.version,
        "version_text": probed.version_text,
        "bytecode_versions": [list(v) for v in probed.bytecode_versions],
    }
    try:
        with trusted_dir(settings.cache_dir, ("toolchains",), create=True, shared=settings.cache_shared) as folder:
            folder.write(name, json.dumps(data).encode())
    except UntrustedError as refused:
        warn_refused(refused)
    except OSError:
        return
