"""Every tile.aio error derives from the runtime root and a builtin, keeps its fields, and pickles."""

from __future__ import annotations

import pickle

import pytest

from tile import aio
from tile.bindings import TileError

CASES = [
    (aio.OpConsumedError("the Map op", "executed by .sync() at f.py:3"), RuntimeError, "runs at most once"),
    (aio.ExecutionLockError(".sync()"), RuntimeError, "would deadlock"),
    (aio.CaptureError("alloc(8)", "it allocates memory"), RuntimeError, "allocate the buffers first"),
    (aio.ContextMismatchError("the launch", "a CUDA stream", "HostStream"), TypeError, "schedule it with"),
    (aio.OpTypeError("zip()", "a DeviceOp", "int"), TypeError, "tile.aio.value"),
    (aio.CopyError("sizes differ"), ValueError, "same size"),
    (aio.EventLoopError("the launch of k"), RuntimeError, "call .sync()"),
    (aio.ClosedError("the graph", "capture again"), RuntimeError, "capture again"),
    (aio.KnobError("TILE_AIO_SPIN_US", "x", "an integer >= 0"), ValueError, "fix or unset it"),
]


@pytest.mark.parametrize(("error", "builtin", "hint"), CASES, ids=[type(c[0]).__name__ for c in CASES])
def test_errors_are_typed_hinted_and_picklable(error: Exception, builtin: type[Exception], hint: str) -> None:
    assert isinstance(error, TileError)
    assert isinstance(error, builtin)
    assert hint in str(error)
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is type(error)
    assert str(clone) == str(error)
    assert vars(clone) == vars(error)
