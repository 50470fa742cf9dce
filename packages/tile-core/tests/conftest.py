"""Fixtures for tile-core's GPU tests: the device, the vec_add cubin built by tileiras, and a summary line store.

GPU tests are marked ``gpu`` (and ``requires_tileiras`` when they need the assembler); the root conftest skips
them without a GPU. Lines recorded through ``gpu_summary`` are printed at the end of the run, so a GPU batch
shows what was measured (device, cycle counts, memory deltas) even under ``-q``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

import tile.bindings as tb
import tile.core as tc

FIXTURE = Path(__file__).with_name("fixtures") / "vec_add.tileirbc"
_SUMMARY: list[str] = []


@pytest.fixture(scope="session")
def device() -> tc.Device:
    return tc.Device(0)


@pytest.fixture(scope="session")
def vec_add_cubin(device: tc.Device, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The fixture kernel assembled for the test device's arch (see fixtures/make_vec_add.py for its ABI)."""
    return assemble(device.arch, tmp_path_factory.mktemp("cubin"))


def assemble(arch: str, directory: Path) -> bytes:
    found = tb.find_tileiras()
    assert found is not None, "tileiras not found: pip install nvidia-cuda-tileiras"
    out = directory / f"vec_add_{arch}.cubin"
    env = {key: value for key, value in os.environ.items() if key != "CUDA_HOME"}
    subprocess.run([str(found.path), f"--gpu-name={arch}", "-o", str(out), str(FIXTURE)], check=True, env=env)
    return out.read_bytes()


@pytest.fixture(scope="session")
def assemble_vec_add(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], bytes]:
    """Assemble the fixture kernel for any arch (no GPU needed)."""
    directory = tmp_path_factory.mktemp("cubins")
    return lambda arch: assemble(arch, directory)


@pytest.fixture(scope="session")
def vec_add(vec_add_cubin: bytes, device: tc.Device) -> tc.Function:
    return tc.Module.from_cubin(vec_add_cubin, device=device, name="vec_add").function("vec_add")


@pytest.fixture
def gpu_summary() -> list[str]:
    return _SUMMARY


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _SUMMARY:
        terminalreporter.section("tile-core GPU summary")
        for line in _SUMMARY:
            terminalreporter.write_line(line)
