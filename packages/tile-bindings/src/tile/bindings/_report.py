"""The environment report: driver, devices and toolchain as one value, for ``tile-doctor`` and the README demo.

Invariants: building a report never raises, on any machine; what could not be determined is recorded as a
reason string rather than omitted. ``str(report)`` is the human form, ``report.to_dict()`` the JSON form.
"""

from __future__ import annotations

import importlib.metadata
import platform
from dataclasses import asdict, dataclass, field
from typing import Any

from tile.bindings import _device
from tile.bindings._driver import driver_unavailable_reason
from tile.bindings._errors import TileError
from tile.bindings._launch_path import launch_path
from tile.bindings._tileiras import TileirasLocation, tileiras_candidates

__all__ = ["DeviceInfo", "EnvironmentReport", "environment_report"]


@dataclass(frozen=True)
class DeviceInfo:
    """What the report says about one GPU."""

    ordinal: int
    name: str
    arch: str
    compute_capability: tuple[int, int]
    total_memory: int
    sm_count: int


@dataclass(frozen=True)
class EnvironmentReport:
    """A snapshot of what Tile can use on this machine.

    Attributes
    ----------
    python, platform : str
        Interpreter version and OS/machine.
    packages : dict
        Installed versions of the Tile distributions, then of those Tile relies on (None when absent).
    driver_version : tuple of int or None
        CUDA version the driver supports; None when no driver is usable, see ``driver_error``.
    devices : tuple of DeviceInfo
        The visible GPUs.
    tileiras : tuple of TileirasLocation
        Every place looked at for ``tileiras``, in search order; the first usable one is what would run.
    interpreter_error : str or None
        Why the CPU interpreter (``tile.ir.interp``: tile-ir with numpy and ml-dtypes) cannot run kernels here,
        or None when it can.
    launch_path : str
        tile.frontend's launch path here: ``compiled (<extension file>)`` or ``pure Python (<why>)``.
    """

    python: str
    platform: str
    packages: dict[str, str | None]
    driver_version: tuple[int, int] | None
    driver_error: str | None
    devices: tuple[DeviceInfo, ...]
    device_error: str | None = None
    tileiras: tuple[TileirasLocation, ...] = field(default_factory=tuple)
    interpreter_error: str | None = None
    launch_path: str = ""

    @property
    def selected_tileiras(self) -> TileirasLocation | None:
        """The ``tileiras`` that would run, or None."""
        return next((c for c in self.tileiras if c.usable), None)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dictionary."""
        data = asdict(self)
        data["tileiras"] = [{**asdict(c), "path": str(c.path)} for c in self.tileiras]
        selected = self.selected_tileiras
        data["selected_tileiras"] = str(selected.path) if selected else None
        data["verdict"] = self.verdict
        return data

    def __str__(self) -> str:
        lines = [f"Python    {self.python} on {self.platform}"]
        lines += [f"package   {name} {version or '(not installed)'}" for name, version in self.packages.items()]
        if self.driver_version is None:
            lines.append(f"driver    not available: {self.driver_error}")
        else:
            lines.append(f"driver    CUDA {self.driver_version[0]}.{self.driver_version[1]}")
        if self.device_error:
            lines.append(f"devices   could not be listed: {self.device_error}")
        for d in self.devices:
            lines.append(f"device {d.ordinal}  {d.name}, {d.arch}, {d.sm_count} SMs, {d.total_memory / 2**30:.1f} GiB")
        if self.driver_version is not None and not self.devices and not self.device_error:
            lines.append("devices   none visible")
        lines.extend(_tileiras_lines(self.tileiras, self.gpu_install_hint))
        lines.append(f"interp    {self.interpreter_error or 'the CPU interpreter (tile.ir.interp) can run kernels'}")
        if self.launch_path:
            lines.append(f"launch    {self.launch_path}")
        lines.append(f"verdict   {self.verdict}")
        return "\n".join(lines)

    @property
    def gpu_install_hint(self) -> str:
        """The command that installs ``tileiras`` for what is installed here (the ``gpu`` extra)."""
        for owner in ("tile-frontend", "tile-compiler"):
            if self.packages.get(owner):
                return f"pip install '{owner}[gpu]'"
        return "pip install nvidia-cuda-tileiras"

    @property
    def verdict(self) -> str:
        """One line: what Tile can do here."""
        gpu, assembler = bool(self.devices), self.selected_tileiras is not None
        interp = self.interpreter_error is None
        if gpu and assembler:
            return "ready: kernels compile and run on the GPU"
        if assembler:
            otherwise = "on the CPU interpreter otherwise" if interp else "the CPU interpreter is not installed"
            return f"compile-only: kernels compile to cubins; running them needs a GPU ({otherwise})"
        if gpu:
            return f"GPU present but no tileiras: {self.gpu_install_hint} to compile kernels"
        if interp:
            return "CPU only: no GPU and no tileiras; the CPU interpreter runs kernels"
        return "nothing runs kernels here: no GPU, no tileiras, and the CPU interpreter is not installed"


def _tileiras_lines(candidates: tuple[TileirasLocation, ...], hint: str) -> list[str]:
    if not candidates:
        return [f"tileiras  not found: {hint}, or set TILE_TILEIRAS"]
    selected = next((c for c in candidates if c.usable), None)
    lines = []
    for c in candidates:
        mark = "->" if c is selected else "  "
        state = f"version {c.version}" if c.version else ("version unknown" if c.usable else "not executable")
        lines.append(f"tileiras {mark} {c.path} (from {c.source}, {state})")
    if selected is None:
        lines.append(f"tileiras  none usable: {hint}, or set TILE_TILEIRAS")
    return lines


_TILE_DISTRIBUTIONS = ("tile-bindings", "tile-core", "tile-async", "tile-ir", "tile-compiler", "tile-frontend")
_OTHER_DISTRIBUTIONS = ("cuda-bindings", "cuda-core", "nvidia-cuda-tileiras", "cuda-tile", "numpy", "ml-dtypes")


def _package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in _TILE_DISTRIBUTIONS + _OTHER_DISTRIBUTIONS:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _interpreter_error(packages: dict[str, str | None]) -> str | None:
    """Why ``tile.ir.interp`` cannot run, read from the installed distributions (nothing is imported)."""
    missing = [name for name in ("tile-ir", "numpy", "ml-dtypes") if not packages.get(name)]
    if not missing:
        return None
    fix = "pip install tile-frontend" if not packages.get("tile-ir") else "pip install 'tile-ir[interp]'"
    return f"the CPU interpreter is not installed (missing {', '.join(missing)}): {fix}"


def _devices() -> tuple[DeviceInfo, ...]:
    infos = []
    for ordinal in range(_device.device_count()):
        major, minor = _device.compute_capability(ordinal)
        infos.append(
            DeviceInfo(
                ordinal=ordinal,
                name=_device.device_name(ordinal),
                arch=f"sm_{major}{minor}",
                compute_capability=(major, minor),
                total_memory=_device.device_total_memory(ordinal),
                sm_count=_device.device_attribute(ordinal, "multiprocessor_count"),
            )
        )
    return tuple(infos)


def environment_report() -> EnvironmentReport:
    """Collect the environment report; never raises."""
    reason = driver_unavailable_reason()
    version: tuple[int, int] | None = None
    devices: tuple[DeviceInfo, ...] = ()
    device_error = None
    if reason is None:
        try:
            version = _device.driver_version()
            devices = _devices()
        except TileError as exc:
            device_error = str(exc)
    packages = _package_versions()
    return EnvironmentReport(
        python=platform.python_version(),
        platform=f"{platform.system()} {platform.machine()}",
        packages=packages,
        driver_version=version,
        driver_error=reason,
        devices=devices,
        device_error=device_error,
        tileiras=tuple(tileiras_candidates(probe_versions=True)),
        interpreter_error=_interpreter_error(packages),
        launch_path=launch_path(),
    )
