"""tileiras discovery order and the environment report / tile-doctor CLI."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest
from cuda.bindings import driver as cu

import tile.bindings as tb
from tile.bindings import _driver, _launch_path, _tileiras
from tile.bindings.__main__ import main

_FAKE_TILEIRAS = """#!/bin/sh
echo "Cuda compilation tools, release 13.9, V13.9.1"
"""


def _fake_tool(directory: Path, body: str = _FAKE_TILEIRAS, executable: bool = True) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    tool = directory / "tileiras"
    tool.write_text(body)
    tool.chmod(0o755 if executable else 0o644)
    return tool


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No override, an empty PATH, no CUDA_HOME, and no pip package."""
    monkeypatch.delenv("TILE_TILEIRAS", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(_tileiras, "_pip_candidate", lambda: None)
    return tmp_path


def test_nothing_found(clean_env: Path) -> None:
    assert tb.tileiras_candidates() == []
    assert tb.find_tileiras() is None


def test_search_order_is_override_pip_path_cuda_home(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    override = _fake_tool(clean_env / "override")
    pip_tool = _fake_tool(clean_env / "pip")
    path_tool = _fake_tool(clean_env / "onpath")
    home_tool = _fake_tool(clean_env / "home" / "bin")
    monkeypatch.setenv("TILE_TILEIRAS", str(override))
    monkeypatch.setattr(_tileiras, "_pip_candidate", lambda: (pip_tool, "13.5.37"))
    monkeypatch.setenv("PATH", str(path_tool.parent))
    monkeypatch.setenv("CUDA_HOME", str(clean_env / "home"))
    found = tb.tileiras_candidates()
    assert [(c.path, c.source) for c in found] == [
        (override, "TILE_TILEIRAS"),
        (pip_tool, "nvidia-cuda-tileiras"),
        (path_tool, "PATH"),
        (home_tool, "CUDA_HOME"),
    ]
    assert tb.find_tileiras() == found[0]


def test_unusable_override_falls_through_and_is_listed(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = _fake_tool(clean_env / "override", executable=False)
    home_tool = _fake_tool(clean_env / "home" / "bin")
    monkeypatch.setenv("TILE_TILEIRAS", str(broken))
    monkeypatch.setenv("CUDA_HOME", str(clean_env / "home"))
    first, second = tb.tileiras_candidates()
    assert (first.path, first.usable) == (broken, False)
    selected = tb.find_tileiras()
    assert selected is not None
    assert selected == second
    assert selected.path == home_tool


def test_version_is_probed_only_when_asked(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = _fake_tool(clean_env / "override")
    monkeypatch.setenv("TILE_TILEIRAS", str(tool))
    plain = tb.find_tileiras()
    assert plain is not None
    assert plain.version is None
    probed = tb.find_tileiras(probe_version=True)
    assert probed is not None
    assert probed.version == "13.9.1"
    assert tb.tileiras_candidates(probe_versions=True)[0].version == "13.9.1"


def test_version_probe_of_a_silent_tool_is_unknown(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_TILEIRAS", str(_fake_tool(clean_env / "o", body="#!/bin/sh\nexit 3\n")))
    found = tb.find_tileiras(probe_version=True)
    assert found is not None
    assert found.version is None


def test_pip_package_is_located_without_importing_cuda() -> None:
    code = (
        "import sys\nfrom tile.bindings import tileiras_candidates\nc = tileiras_candidates()\n"
        "print(any(m == 'cuda' or m.startswith(('cuda.', 'nvidia')) for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_pip_candidate_matches_the_installed_distribution(missing: Callable[[str, str], NoReturn]) -> None:
    try:
        dist = importlib.metadata.distribution("nvidia-cuda-tileiras")
    except importlib.metadata.PackageNotFoundError:
        missing("requires_tileiras", "nvidia-cuda-tileiras is not installed")  # fails under TILE_REQUIRE_TILEIRAS=1
    found = _tileiras._pip_candidate()
    assert found is not None
    assert found == (Path(str(dist.locate_file("nvidia/cu13/bin/tileiras"))), dist.version)


@pytest.fixture
def no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_driver._state, "module", None)
    monkeypatch.setattr(_driver._state, "failure", None)

    def missing(flags: int) -> None:
        raise RuntimeError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(cu, "cuInit", missing)


@pytest.mark.usefixtures("no_driver")
def test_report_without_driver_says_why(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_TILEIRAS", str(_fake_tool(clean_env / "o")))
    report = tb.environment_report()
    assert report.driver_version is None
    assert report.devices == ()
    text = str(report)
    assert "driver    not available" in text
    assert "libcuda.so.1" in text
    assert "version 13.9.1" in text
    assert report.verdict.startswith("compile-only")
    assert json.loads(json.dumps(report.to_dict()))["selected_tileiras"].endswith("tileiras")


@pytest.mark.usefixtures("no_driver")
def test_report_with_nothing_usable(clean_env: Path) -> None:
    report = tb.environment_report()
    text = str(report)
    assert f"tileiras  not found: {report.gpu_install_hint}, or set TILE_TILEIRAS" in text
    assert "verdict   CPU only" in text


def _report(packages: dict[str, str | None], *, devices: bool = False) -> tb.EnvironmentReport:
    from tile.bindings._report import DeviceInfo, _interpreter_error

    gpu = (DeviceInfo(0, "H100", "sm_90", (9, 0), 80 * 2**30, 132),) if devices else ()
    return tb.EnvironmentReport(
        "3.12.0", "Linux x86_64", packages, None, "no driver", gpu, None, (), _interpreter_error(packages)
    )


@pytest.mark.parametrize(
    ("installed", "hint"),
    [
        ({"tile-frontend": "0.1.0", "tile-compiler": "0.1.0"}, "pip install 'tile-frontend[gpu]'"),
        ({"tile-compiler": "0.1.0"}, "pip install 'tile-compiler[gpu]'"),
        ({"tile-bindings": "0.1.0"}, "pip install nvidia-cuda-tileiras"),
    ],
)
def test_missing_tileiras_names_the_extra_of_what_is_installed(installed: dict[str, str | None], hint: str) -> None:
    report = _report(installed, devices=True)
    assert report.gpu_install_hint == hint
    assert report.verdict == f"GPU present but no tileiras: {hint} to compile kernels"
    assert f"tileiras  not found: {hint}, or set TILE_TILEIRAS" in str(report)


def test_the_interpreter_is_reported_only_when_installed() -> None:
    everything: dict[str, str | None] = {
        "tile-ir": "0.1.0",
        "numpy": "2.1.0",
        "ml-dtypes": "0.5.0",
        "tile-frontend": "0.1.0",
    }
    assert _report(everything).interpreter_error is None
    assert "the CPU interpreter runs kernels" in _report(everything).verdict
    assert "interp    the CPU interpreter (tile.ir.interp) can run kernels" in str(_report(everything))
    no_numpy = _report({"tile-ir": "0.1.0", "ml-dtypes": "0.5.0"})
    assert no_numpy.interpreter_error is not None
    assert "missing numpy" in no_numpy.interpreter_error
    assert "pip install 'tile-ir[interp]'" in no_numpy.interpreter_error
    assert no_numpy.verdict.startswith("nothing runs kernels here")
    nothing = _report({"tile-bindings": "0.1.0"})
    assert nothing.interpreter_error is not None
    assert "pip install tile-frontend" in nothing.interpreter_error


def test_the_report_lists_the_installed_tile_packages() -> None:
    report = tb.environment_report()
    names = ("tile-bindings", "tile-core", "tile-async", "tile-ir", "tile-compiler", "tile-frontend")
    assert list(report.packages)[:6] == list(names)
    for name in names:
        try:
            expected: str | None = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            expected = None
        assert report.packages[name] == expected
        assert f"package   {name} {expected or '(not installed)'}" in str(report)


def test_doctor_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("tile-doctor (tile-bindings) ")


@pytest.mark.usefixtures("no_driver")
def test_doctor_prints_and_exits_zero_unless_required(clean_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "driver    not available" in capsys.readouterr().out
    assert main(["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["driver_version"] is None
    assert main(["--require-gpu"]) == 1


def test_module_entry_point_runs_in_a_fresh_process() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tile.bindings", "--json"], capture_output=True, text=True, check=True, env=os.environ
    )
    data = json.loads(done.stdout)
    assert set(data) >= {"driver_version", "devices", "tileiras", "verdict", "packages"}
    assert (data["driver_version"] is None) == (data["driver_error"] is not None)


@pytest.mark.gpu
def test_report_lists_the_gpu() -> None:
    report = tb.environment_report()
    assert report.driver_version is not None
    assert report.devices
    device = report.devices[0]
    assert device.arch.startswith("sm_")
    assert device.sm_count > 0
    assert device.name in str(report)
    print(report)


def test_launch_path_is_pure_when_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_PURE_PYTHON", "1")
    assert tb.environment_report().launch_path == "pure Python (TILE_PURE_PYTHON=1 forces it)"
    assert "launch    pure Python (TILE_PURE_PYTHON=1" in str(tb.environment_report())


def test_launch_path_says_when_the_extension_is_missing_or_broken(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TILE_PURE_PYTHON", raising=False)
    monkeypatch.setattr(_launch_path, "_extensions", list)
    assert "is not built" in _launch_path.launch_path()
    broken = tmp_path / "_fastlaunch.abi3.so"
    broken.write_bytes(b"not an ELF file")
    monkeypatch.setattr(_launch_path, "_extensions", lambda: [broken])
    assert _launch_path.launch_path().startswith(f"pure Python ({broken} does not load")


def test_launch_path_is_compiled_where_the_extension_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TILE_PURE_PYTHON", raising=False)
    built = _launch_path._extensions()
    if not built:
        if os.environ.get("TILE_REQUIRE_EXTENSION") == "1":
            pytest.fail("TILE_REQUIRE_EXTENSION=1 but tile/frontend/_fastlaunch is not built")
        pytest.skip("tile-frontend's compiled launch path is not built here")
    assert _launch_path.launch_path() == f"compiled ({built[0]})"
