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
PACKAGES = ["bindings", "core", "async", "ir", "compiler", "frontend"]
ROOT_PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")

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


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole repository."""
    session.install(*nox.project.dependency_groups(ROOT_PYPROJECT, "lint"))
    session.run("ruff", "check", ".", *session.posargs)
    session.run("ruff", "format", "--check", ".")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site; any warning is an error."""
    _install(session, "frontend")
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
    _install(session, "frontend", "test")
    session.install(*nox.project.dependency_groups(ROOT_PYPROJECT, "peer"))
    session.env["TILE_REQUIRE_GPU"] = "1"
    session.run("pytest", "-m", "gpu", "packages", *session.posargs)
