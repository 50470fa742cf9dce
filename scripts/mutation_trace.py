"""A pytest plugin for scripts/mutation.py: which test reaches which line of the mutated modules.

Loaded with ``-p mutation_trace`` (scripts/ on the path) and ``TILE_MUTATION_TRACE=out.json`` naming the modules in
``TILE_MUTATION_FILES`` (paths, ``os.pathsep``-separated). It writes ``{file: {line: [nodeid, ...]}}``; a line run
outside any test (at import or collection) is listed under the node id ``""``, which means "every test". Only
frames of those files are traced (line events), so the run costs little more than the plain one.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Generator
from types import FrameType
from typing import Any

import pytest

_FILES = {os.path.realpath(f) for f in os.environ.get("TILE_MUTATION_FILES", "").split(os.pathsep) if f}
_HITS: dict[str, dict[int, set[str]]] = {f: {} for f in _FILES}
_current = [""]  # the node id of the running test
_REAL: dict[str, str | None] = {}  # a code object's file name -> its real path when traced, else None

Tracer = Callable[[FrameType, str, Any], Any]


def _traced(filename: str) -> str | None:
    real = _REAL.get(filename, "")
    if real == "":
        path = os.path.realpath(filename)
        real = _REAL[filename] = path if path in _FILES else None
    return real


def _local(frame: FrameType, event: str, arg: Any) -> Tracer | None:
    if event == "line":
        _HITS[_traced(frame.f_code.co_filename) or ""].setdefault(frame.f_lineno, set()).add(_current[0])
    return _local


def _global(frame: FrameType, event: str, arg: Any) -> Tracer | None:
    if event == "call" and _traced(frame.f_code.co_filename) is not None:
        _local(frame, "line", arg)  # the def line and first line: a one-line body fires no separate line event
        return _local
    return None


sys.settrace(_global)
threading.settrace(_global)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    """Lines run while `item` runs (setup, call, teardown) are its."""
    _current[0] = item.nodeid
    try:
        yield
    finally:
        _current[0] = ""


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the map."""
    sys.settrace(None)
    out = {f: {str(line): sorted(ids) for line, ids in lines.items()} for f, lines in _HITS.items()}
    with open(os.environ["TILE_MUTATION_TRACE"], "w") as fh:
        json.dump(out, fh)
