"""Developer sessions for the Tile monorepo (``nox -l`` lists them).

Every package is tested in a virtual environment holding only that package, the Tile packages below it
and its ``test`` dependency group, so an undeclared cross-layer import fails here even when the
all-in-one development environment would hide it.
"""

from __future__ import annotations

from pathlib import Path

import nox

ROOT = Path(__file__).parent
# Dependency order: every package comes after the packages it depends on.
PACKAGES = ["errors", "bindings", "core", "async", "ir", "compiler", "frontend", "kernels"]
ROOT_PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")

# The suites that exercise tile.frontend's launch path, run again on its pure-Python fallback (`tests-pure`, .ci/run).
PURE_SUITES = ["packages/tile-core/tests", "packages/tile-frontend/tests", "packages/tile-async/tests", "tests"]

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", *(f"typecheck-{p}" for p in PACKAGES), *(f"tests-{p}" for p in PACKAGES)]
nox.options.error_on_missing_interpreters = True


def _pyproject(package: str) -> dict[str, object]:
    return nox.project.load_toml(ROOT / "packages" / f"tile-{package}" / "pyproject.toml")


def _tile_requirements(package: str) -> list[str]:
    """Return the Tile packages ``package`` needs (itself last), transitively, in dependency order."""
    project = _pyproject(package)["project"]
    assert isinstance(project, dict)
    needed: list[str] = []
    for requirement in project.get("dependencies", []):
        name = str(requirement).split("[")[0].split("=")[0].split(">")[0].strip()
        if name.startswith("tile-"):
            for dep in _tile_requirements(name.removeprefix("tile-")):
                if dep not in needed:
                    needed.append(dep)
    return [*needed, package]


def _install(session: nox.Session, package: str, *groups: str) -> None:
    """Install ``package`` alone (with the Tile packages it declares) plus its dependency groups."""
    paths = [str(ROOT / "packages" / f"tile-{p}") for p in _tile_requirements(package)]
    extras = "[interp]" if package == "ir" else ""
    paths[-1] += extras
    session.install(*(arg for path in paths for arg in ("-e", path)))
    for group in groups:
        session.install(*nox.project.dependency_groups(_pyproject(package), group))


def _register(package: str) -> None:
    @nox.session(name=f"tests-{package}")
    def tests(session: nox.Session) -> None:
        """Run one package's tests with only that package (and the layers below) installed."""
        if "frontend" in _tile_requirements(package) or package == "core":
            # tile-frontend's and tile-core's C launch paths are built at install (hatch_build.py): a failed build
            # must fail here, not fall back to pure Python and skip the compiled-path tests
            session.env["TILE_REQUIRE_EXTENSION"] = "1"
        _install(session, package, "test")
        if any(str(r).startswith("cuda-tile") for r in nox.project.dependency_groups(_pyproject(package), "test")):
            session.env["TILE_REQUIRE_CUTILE"] = "1"  # a declared test dependency: its tests must run, not skip
        session.run("pytest", f"packages/tile-{package}", *session.posargs)

    @nox.session(name=f"typecheck-{package}")
    def typecheck(session: nox.Session) -> None:
        """mypy --strict over one package's sources and tests."""
        _install(session, package, "test")
        session.install(*nox.project.dependency_groups(ROOT_PYPROJECT, "typecheck"))
        session.run("mypy", f"packages/tile-{package}/src", f"packages/tile-{package}/tests", *session.posargs)


for _package in PACKAGES:
    _register(_package)


def _register_install(package: str) -> None:
    @nox.session(name=f"install-{package}")
    def install(session: nox.Session) -> None:
        """Build the wheels, install one package from them alone in a fresh venv, and use it as a user would."""
        dist = Path(session.create_tmp()).resolve() / "dist"
        session.install("hatchling>=1.26")
        wheels = []
        for p in _tile_requirements(package):
            folder = dist / p
            with session.chdir(ROOT / "packages" / f"tile-{p}"):
                session.run("python", "-m", "hatchling", "build", "-t", "wheel", "-d", str(folder), silent=True)
            wheels += [str(w) for w in folder.glob("*.whl")]
        session.install(*wheels)  # wheel files, so no Tile name is resolved from the index
        module = {"async": "aio"}.get(package, package)
        session.chdir(session.create_tmp())  # away from the checkout: import the installed package, not the sources
        session.run("python", "-c", f"import tile.{module}")
        freeze = session.run("python", "-m", "pip", "freeze", silent=True) or ""
        if "nvidia-cuda-tileiras" in str(freeze):
            session.error(f"tile-{package} pulled nvidia-cuda-tileiras without the gpu extra")
        commands = {"bindings": ["tile-doctor"], "ir": ["tile-ir", "--version"], "compiler": ["tile", "--version"]}
        if package in commands:
            session.run(*commands[package])
        if package == "frontend":
            session.run("python", "-m", "tile.frontend.demo", env={"TILE_INTERPRET": "1"})


for _package in PACKAGES:
    _register_install(_package)


@nox.session(name="tests-pure")
def tests_pure(session: nox.Session) -> None:
    """The launch-path suites on the pure-Python launch path (``TILE_PURE_PYTHON=1``); ``tests-core`` and
    ``tests-frontend`` run them on the compiled ones, which the editable installs build."""
    _install(session, "frontend", "test")
    session.install(*nox.project.dependency_groups(ROOT_PYPROJECT, "test"))
    session.env["TILE_PURE_PYTHON"] = "1"
    session.run("pytest", *PURE_SUITES, *session.posargs)


@nox.session
def wheels(session: nox.Session) -> None:
    """Build every package's sdist and wheel (tile-frontend's from its sdist: an abi3 platform wheel with the compiled
    launch path, on a machine with a C compiler), then ``twine check`` them."""
    session.install("build", "twine")
    out = ROOT / "build" / "dist"
    for package in PACKAGES:
        session.run("python", "-m", "build", "--outdir", str(out), str(ROOT / "packages" / f"tile-{package}"))
    session.run("twine", "check", "--strict", *(str(p) for p in sorted(out.iterdir())))


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole repository."""
    session.install(*nox.project.dependency_groups(ROOT_PYPROJECT, "lint"))
    session.run("ruff", "check", ".", *session.posargs)
    session.run("ruff", "format", "--check", ".")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site; any warning is an error."""
    _install(session, "kernels")
    session.install(*nox.project.dependency_groups(ROOT_PYPROJECT, "docs"))
    session.env["NO_MKDOCS_2_WARNING"] = "1"  # Material's end-of-life banner is not a docs problem
    session.run("mkdocs", "build", "--strict", "--site-dir", str(ROOT / "build" / "site"))


@nox.session
def examples(session: nox.Session) -> None:
    """Run every example script (on the GPU when there is one, else through the CPU interpreter)."""
    _install(session, "frontend")
    for script in sorted((ROOT / "examples").glob("*.py")):
        session.run("python", str(script))


@nox.session
def mutation(session: nox.Session) -> None:
    """Mutation testing of the promise-carrying modules (scripts/mutation.py); ``-- --sample 25`` runs a slice."""
    _install(session, "frontend", "test")
    for package in ("ir", "compiler", "core"):
        session.install(*nox.project.dependency_groups(_pyproject(package), "test"))
    session.run("python", "scripts/mutation.py", *session.posargs)


@nox.session
def gpu(session: nox.Session) -> None:
    """The ``gpu``-marked tests, for a machine with an NVIDIA GPU; skipping is a failure here."""
    _install(session, "kernels", "test")  # tile-kernels brings every package below it
    session.install(*nox.project.dependency_groups(ROOT_PYPROJECT, "peer"))
    session.env["TILE_REQUIRE_GPU"] = "1"
    session.run("pytest", "-m", "gpu", "packages", *session.posargs)
