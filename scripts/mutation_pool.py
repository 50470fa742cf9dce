"""How scripts/mutation.py runs its mutants: scratch copies of the sources, pytest runs, and a pool of workers.

Each worker owns one scratch copy of every package's sources (``--jobs N`` makes N of them), writes its mutant into
its own copy and restores the module before it takes the next, so no two mutants ever share a file. The trace of a
target (which test reaches which line) is made once, in the first worker's copy, and keyed by module path relative
to the repository root, so every worker reads the same map. Results come back in the order the mutants were given,
whatever order they finish in, so a run's output and report do not depend on ``--jobs``.

Each pytest process also gets its own compile cache (the repository's conftest.py makes one per process) and its
own pytest temporary folders, so parallel runs share no state on disk.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(ROOT.glob("packages/tile-*/src"))

T = TypeVar("T")
R = TypeVar("R")


def pytest_run(
    tests: list[str], sources: list[Path], timeout: float, env: dict[str, str] | None = None, *, first: bool = True
) -> tuple[int, float]:
    """Run `tests` with `sources` first on the path, stopping at the `first` failure; return (exit status,
    seconds); a timeout is status -1."""
    # The inherited path stays after the sources: a test dependency installed by path (cuTile Python unpacked into a
    # --target folder on the GPU machine) must stay importable; the scratch copies come first, so they win.
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    path = os.pathsep.join([*(str(s) for s in sources), *inherited])
    full_env = {**os.environ, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    command = [sys.executable, "-m", "pytest", *(["-x"] if first else []), "-q", "-p", "no:cacheprovider", *tests]
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, env=full_env, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return -1, time.monotonic() - start
    return done.returncode, time.monotonic() - start


@dataclass
class Reach:
    """One target's unmutated run: its time, and which tests run which lines of its modules."""

    seconds: float
    hits: dict[str, dict[int, set[str]]]  # module (relative to the root) -> line -> node ids ("": every test)

    def tests_for(self, module: str, lines: Iterable[int], in_function: bool) -> set[str] | None:
        """The tests that run `lines` of `module`; None when every test may (import-time code)."""
        hit = self.hits.get(module, {})
        found: set[str] = set()
        for line in lines:
            found |= hit.get(line, set())
        return None if "" in found or not in_function else found


def copy_of(root: Path, module: str) -> Path:
    """Where `module` (a path relative to the repository root) lies in the scratch copy at `root`."""
    return root / Path(module).relative_to("packages")


def trace(name: str, tests: list[str], modules: Iterable[str], root: Path, copies: list[Path]) -> Reach | None:
    """Run target `name`'s tests unmutated in the copy at `root` (None when one fails), then again tracing which
    test reaches which line of `modules`.

    The traced run's outcome is ignored: a tracer changes what a few tests observe (when the cyclic collector runs,
    how long a step takes), and a test failing there still records the lines it reached.
    """
    status, seconds = pytest_run(tests, copies, 1800)
    if status != 0:
        return None
    files = {str(copy_of(root, m).resolve()): m for m in modules}
    out = root / f"trace-{name}.json"
    env = {"TILE_MUTATION_TRACE": str(out), "TILE_MUTATION_FILES": os.pathsep.join(files)}
    pytest_run(["-p", "mutation_trace", *tests], [*copies, ROOT / "scripts"], 1800, env, first=False)
    raw = json.loads(out.read_text())
    hits = {files[f]: {int(line): set(ids) for line, ids in lines.items()} for f, lines in raw.items()}
    return Reach(seconds, hits)


def outcome(everything: list[str], first: set[str] | None, seconds: float, copies: list[Path]) -> str:
    """Run the tests that reach a mutant (`first`; None: all of them) first, as most kills end there, then, if it
    survived them, the rest of `everything`; `seconds` is the unmutated run's time."""
    timeout = 60 + 4 * seconds
    if first is not None and not first:
        return "survived (no test reaches it)"
    status, _ = pytest_run(sorted(first) if first is not None else everything, copies, timeout)
    if status == 4:  # pytest could not take a node id (a usage error, not a failing test): run them all
        first, (status, _) = None, pytest_run(everything, copies, timeout)
    if status == 0 and first is not None:
        # a test that reached the line only at its first call (a cache, a lazily built table) may check it later
        status, _ = pytest_run([*everything, *(f"--deselect={t}" for t in sorted(first))], copies, timeout)
    if status == -1:
        return "timeout (killed)"
    return "survived" if status in (0, 5) else "killed"


@dataclass(frozen=True)
class Worker:
    """One scratch copy of the sources: `root` holds it, `copies` are its ``src`` folders (the PYTHONPATH)."""

    root: Path
    copies: list[Path]


class Pool:
    """`jobs` workers under `scratch`, each with its own copy of the sources."""

    def __init__(self, scratch: Path, jobs: int) -> None:
        self.workers = [self._copy(scratch / f"worker{i}") for i in range(max(jobs, 1))]

    @staticmethod
    def _copy(root: Path) -> Worker:
        copies = []
        for src in SOURCES:
            copy = root / src.parent.name / "src"
            shutil.copytree(src, copy, ignore=shutil.ignore_patterns("__pycache__"))
            copies.append(copy)
        return Worker(root, copies)

    def map(self, work: Callable[[Worker, T], R], items: Iterable[T]) -> Iterator[R]:
        """`work(worker, item)` for every item, at most one item per worker at a time; results in `items`' order.
        Leaving the results early (an exception, Ctrl-C) cancels the items not started yet."""
        free: queue.Queue[Worker] = queue.Queue()
        for worker in self.workers:
            free.put(worker)

        def one(item: T) -> R:
            worker = free.get()
            try:
                return work(worker, item)
            finally:
                free.put(worker)

        with ThreadPoolExecutor(len(self.workers)) as executor:
            yield from executor.map(one, items)
