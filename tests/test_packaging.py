"""What each of the eight distributions ships and declares.

* Every package's imports (an AST scan of its ``src``) are exactly its declared dependencies: nothing imported
  is undeclared, nothing declared goes unused (extras may hold what only one subpackage imports, and tools
  found by path, such as ``nvidia-cuda-tileiras``).
* Each wheel and sdist, built with hatchling, carries the Apache-2.0 LICENSE, the metadata users read on the
  index (license, Python classifiers 3.10 to 3.13, project URLs, the declared requirements) and nothing
  internal: no team notes, no paths of the machine that built it, no pointer to a document users cannot see.
"""

from __future__ import annotations

import ast
import email
import email.message
import importlib.util
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("errors", "bindings", "core", "async", "ir", "compiler", "frontend", "kernels")
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
# Top-level import name (two levels for the ``tile`` and ``cuda`` namespaces) -> the distribution providing it.
DISTRIBUTION_OF = {
    "tile.errors": "tile-errors",
    "tile.kernels": "tile-kernels",
    "tile.bindings": "tile-bindings",
    "tile.core": "tile-core",
    "tile.aio": "tile-async",
    "tile.ir": "tile-ir",
    "tile.compiler": "tile-compiler",
    "tile.frontend": "tile-frontend",
    "cuda.bindings": "cuda-bindings",
    "cuda.core": "cuda-core",
    "numpy": "numpy",
    "ml_dtypes": "ml-dtypes",
    "mypy": "mypy",
    "rich": "rich",
    "torch": "torch",
}
# Distributions that are used without being imported: executables found on disk.
NOT_IMPORTED = {"nvidia-cuda-tileiras"}
INTERNAL_NAMES = {"API_NOTES.md", "REQUESTS.md", "INTERFACES.md", "DESIGN.md", "STYLE.md", "HELPERS.md"}
# A path of the machine that built the artifact, or a pointer to the team's design notes.
LEAKS = re.compile(rb"/work/|/home/[a-z]|/root/|DESIGN \xc2\xa7|DESIGN\.md")


def _pyproject(package: str) -> dict[str, object]:
    with (ROOT / "packages" / f"tile-{package}" / "pyproject.toml").open("rb") as file:
        data: dict[str, object] = tomllib.load(file)
    return data


def _project(package: str) -> dict[str, object]:
    project = _pyproject(package)["project"]
    assert isinstance(project, dict)
    return project


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].strip().lower()


def _import_name(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in {"tile", "cuda"} and len(parts) > 1 else parts[0]


def imported_names(src: Path) -> set[str]:
    """The non-stdlib top-level names imported anywhere under ``src`` (``from tile import ir`` is ``tile.ir``)."""
    names: set[str] = set()
    for file in src.rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            if isinstance(node, ast.Import):
                names.update(_import_name(alias.name) for alias in node.names if alias.name != "tile")
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module in {"tile", "cuda"}:
                    names.update(f"{node.module}.{alias.name}" for alias in node.names)
                else:
                    names.add(_import_name(node.module))
    return {n for n in names if n.split(".")[0] not in sys.stdlib_module_names or n.startswith(("tile.", "cuda."))}


def _declared(package: str) -> tuple[set[str], set[str]]:
    project = _project(package)
    required = {_name(str(r)) for r in project.get("dependencies", [])}  # type: ignore[attr-defined]
    extras = project.get("optional-dependencies", {})
    assert isinstance(extras, dict)
    optional = {_name(str(r)) for group in extras.values() for r in group}
    return required, optional


@pytest.mark.parametrize("package", PACKAGES)
def test_declared_dependencies_match_the_imports(package: str) -> None:
    own = f"tile-{package}"
    imported = imported_names(ROOT / "packages" / own / "src")
    unknown = sorted(n for n in imported if n not in DISTRIBUTION_OF)
    assert unknown == [], f"{own} imports {unknown}: add them to DISTRIBUTION_OF (and to its dependencies)"
    used = {DISTRIBUTION_OF[n] for n in imported} - {own}
    required, optional = _declared(package)
    assert sorted(used - required - optional) == [], f"{own} imports undeclared distributions"
    assert sorted(required - used) == [], f"{own} declares dependencies it never imports"
    assert sorted(optional - used - NOT_IMPORTED) == [], f"{own} has extras it never imports"


def test_the_import_scan_sees_every_spelling(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import os\nimport numpy as np\nfrom tile import core, ir\nimport tile.aio._op\n"
        "from cuda.bindings import driver\nfrom . import sibling\ndef f():\n    import ml_dtypes\n"
    )
    assert imported_names(tmp_path) == {"numpy", "tile.core", "tile.ir", "tile.aio", "cuda.bindings", "ml_dtypes"}


def test_the_gpu_toolchain_is_an_extra_not_a_requirement() -> None:
    for package in PACKAGES:
        required, _ = _declared(package)
        assert "nvidia-cuda-tileiras" not in required, f"tile-{package} would pull the toolchain on a CPU machine"
    for package in ("compiler", "frontend"):
        extras = _project(package)["optional-dependencies"]
        assert isinstance(extras, dict)
        assert "gpu" in extras


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_ships_the_root_license(package: str) -> None:
    root = (ROOT / "LICENSE").read_text()
    assert "Apache License" in root
    assert "Version 2.0, January 2004" in root
    assert (ROOT / "packages" / f"tile-{package}" / "LICENSE").read_text() == root


# --- built artifacts --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Built:
    """One built distribution: its file names and contents, and its core metadata."""

    package: str
    kind: str
    files: dict[str, bytes]
    metadata: email.message.Message

    def find(self, suffix: str) -> list[str]:
        return [name for name in self.files if name.endswith(suffix)]


def _read_wheel(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _read_sdist(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as archive:
        members = [m for m in archive.getmembers() if m.isfile()]
        return {m.name: archive.extractfile(m).read() for m in members}  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Built]:
    """Every package's wheel and sdist, built once with hatchling (no network: the backend is installed)."""
    if importlib.util.find_spec("hatchling") is None:
        pytest.fail("hatchling is not installed: it is in the root test group (bash scripts/dev.sh test installs it)")
    out = tmp_path_factory.mktemp("dist")
    result: dict[tuple[str, str], Built] = {}
    for package in PACKAGES:
        folder = out / package
        subprocess.run(
            [sys.executable, "-m", "hatchling", "build", "-d", str(folder)],
            cwd=ROOT / "packages" / f"tile-{package}",
            check=True,
            capture_output=True,
        )
        (wheel,) = folder.glob("*.whl")
        (sdist,) = folder.glob("*.tar.gz")
        files = _read_wheel(wheel)
        (meta,) = [n for n in files if n.endswith(".dist-info/METADATA")]
        result[package, "wheel"] = Built(package, "wheel", files, email.message_from_bytes(files[meta]))
        files = _read_sdist(sdist)
        (meta,) = [n for n in files if n.count("/") == 1 and n.endswith("/PKG-INFO")]
        result[package, "sdist"] = Built(package, "sdist", files, email.message_from_bytes(files[meta]))
    return result


def _artifacts() -> Iterator[tuple[str, str]]:
    for package in PACKAGES:
        yield package, "wheel"
        yield package, "sdist"


ARTIFACTS = pytest.mark.parametrize(("package", "kind"), list(_artifacts()))


@ARTIFACTS
def test_artifact_carries_the_license(built: dict[tuple[str, str], Built], package: str, kind: str) -> None:
    artifact = built[package, kind]
    licenses = artifact.find("/LICENSE")
    assert licenses, f"no LICENSE in the {kind} of tile-{package}"
    assert all(artifact.files[name] == (ROOT / "LICENSE").read_bytes() for name in licenses)
    assert artifact.metadata["License-Expression"] == "Apache-2.0"
    assert "LICENSE" in artifact.metadata.get_all("License-File", [])


@ARTIFACTS
def test_artifact_ships_nothing_internal(built: dict[tuple[str, str], Built], package: str, kind: str) -> None:
    artifact = built[package, kind]
    internal = sorted(name for name in artifact.files if Path(name).name in INTERNAL_NAMES)
    assert internal == []
    leaking = sorted(name for name, data in artifact.files.items() if LEAKS.search(data))
    assert leaking == [], f"machine paths or internal references in {leaking}"


@ARTIFACTS
def test_artifact_metadata(built: dict[tuple[str, str], Built], package: str, kind: str) -> None:
    meta = built[package, kind].metadata
    assert meta["Name"] == f"tile-{package}"
    assert meta["Requires-Python"] == ">=3.10"
    classifiers = set(meta.get_all("Classifier", []))
    assert {f"Programming Language :: Python :: {v}" for v in PYTHONS} <= classifiers
    no_cuda = {"ir", "errors"}  # pure Python toolkits: tile-ir's interpreter and the error root run anywhere
    assert ("Environment :: GPU :: NVIDIA CUDA" in classifiers) == (package not in no_cuda), "only these need no CUDA"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL", []))
    assert {"Homepage", "Documentation", "Source", "Issues"} <= set(urls)
    project = _project(package)
    declared = [str(r) for r in project.get("dependencies", [])]  # type: ignore[attr-defined]
    plain = [r for r in meta.get_all("Requires-Dist", []) if "extra ==" not in r]
    assert sorted(r.replace(" ", "") for r in plain) == sorted(r.replace(" ", "") for r in declared)
    extras = project.get("optional-dependencies", {})
    assert isinstance(extras, dict)
    assert sorted(meta.get_all("Provides-Extra", [])) == sorted(extras)


@pytest.mark.parametrize("package", PACKAGES)
def test_wheel_holds_every_module_and_the_typing_marker(built: dict[tuple[str, str], Built], package: str) -> None:
    wheel = built[package, "wheel"]
    src = ROOT / "packages" / f"tile-{package}" / "src"
    expected = {p.relative_to(src).as_posix() for p in src.rglob("*.py")}
    assert expected <= set(wheel.files)
    assert any(name.endswith("/py.typed") for name in wheel.files)
    assert not any(name.startswith("tile/__init__") for name in wheel.files), "`tile` is a namespace package"


def test_frontend_artifacts_carry_the_compiled_launch_path(built: dict[tuple[str, str], Built], tmp_path: Path) -> None:
    """tile-frontend's sdist holds every C part of ``_fastlaunch`` (a build from it compiles them all); its wheel holds
    none of them but, where the hook compiled it, the module, linked whole: it loads and has its functions."""
    folder = ROOT / "packages" / "tile-frontend" / "src" / "tile" / "frontend"
    sources = sorted(p.name for p in folder.glob("_fastlaunch*.[ch]"))
    assert "_fastlaunch.c" in sources
    assert "_fastlaunch.h" in sources
    sdist = built["frontend", "sdist"]
    assert sources == sorted(Path(n).name for n in sdist.files if "/src/tile/frontend/_fastlaunch" in n)
    wheel = built["frontend", "wheel"]
    assert [n for n in wheel.files if n.endswith((".c", ".h"))] == []
    (tags,) = [n for n in wheel.files if n.endswith(".dist-info/WHEEL")]
    compiled = "-abi3-" in wheel.files[tags].decode()
    if os.environ.get("TILE_REQUIRE_EXTENSION") == "1":
        assert compiled, "TILE_REQUIRE_EXTENSION=1 but the wheel is pure Python"
    module = "tile/frontend/_fastlaunch.abi3.so"
    assert (module in wheel.files) == compiled
    if compiled:
        path = tmp_path / "_fastlaunch.abi3.so"
        path.write_bytes(wheel.files[module])
        spec = importlib.util.spec_from_file_location("_fastlaunch", path)
        assert spec is not None
        assert spec.loader is not None
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)  # an undefined symbol (a part left out of the build) fails here
        functions = {"admit_move", "call", "drop", "release", "replay", "execute", "sync", "claim_run", "run_links"}
        functions |= {"release_links", "then", "bind", "bind_core", "bind_run", "bind_links"}
        assert functions <= set(dir(loaded))


def test_no_user_visible_text_points_at_the_internal_design_notes() -> None:
    places = [ROOT / "README.md", ROOT / "docs", ROOT / "examples", ROOT / "scripts"]
    places += [ROOT / "packages" / f"tile-{p}" / sub for p in PACKAGES for sub in ("src", "README.md")]
    offenders = []
    for place in places:
        for file in [place] if place.is_file() else place.rglob("*"):
            text = file.read_text(errors="replace") if file.suffix in {".py", ".md", ".sh", ".toml", ".tilepy"} else ""
            if re.search(r"DESIGN (§|\.md)", text):
                offenders.append(str(file.relative_to(ROOT)))
    assert offenders == [], "point users at docs/architecture.md instead"
