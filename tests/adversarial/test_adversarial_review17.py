"""Review 17: holes found by this session's reviews and closed here; each test was seen to fail before its fix.

- A launch matched with the one before it by value: ``-0.0 == 0.0``, so a ``Const[float]`` of ``-0.0`` after one of
  ``0.0`` (or the other way round) reused the plan and the kernel compiled for the other zero (the layout key, the
  plan's Const test in both launch paths, the compiled-kernel caches). (Runtime float scalars: see
  packages/tile-frontend/tests/test_frontend_gpu_path.py, the GPU path's prepared launches.)
- A launch moved into ``.then()`` (or ``.map()``, ``zip()``...) whose op was dropped without ever running kept its
  pending count on every storage it held (``Launch.__del__`` handed back only launches never claimed): a ``free()``
  of that memory through another handle was deferred forever, and the memory never released.
- tile.core called the driver from inside a host function: a ``tile.aio.host_call(fn)`` whose ``fn`` allocates,
  copies, launches, prepares, relaunches or synchronizes reached the driver there (CUDA fails the call or deadlocks;
  the simulated driver records it as a bug). Now tile.core refuses with `HostFunctionError` before the call.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest

import tile.core as tc
import tile.frontend as tile
from tile import aio
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver, sm90_cubin
from tile.frontend import f32


@pytest.mark.parametrize("keyword", [False, True], ids=["positional", "keyword"])
@pytest.mark.parametrize("first", [0.0, -0.0])
def test_a_const_float_of_the_other_zero_gets_its_own_kernel(
    kernels: ModuleType, path: str, first: float, keyword: bool
) -> None:
    x = tile.ones(f32, [64])
    z = tile.zeros(f32, [64]).partition([32])
    for c in [first, -first, first, -first]:
        op = kernels.scale_by_const(z, x, c=c) if keyword else kernels.scale_by_const(z, x, c)
        z, x, _ = op.sync()
        out = z.unpartition()
        got = out.to_numpy()
        z = out.partition([32])
        assert np.signbit(got).tolist() == [np.signbit(c)] * 64, f"c={c!r}: got {got[:2]}"


def test_a_nan_const_is_one_plan_and_one_kernel_not_one_per_call(kernels: ModuleType, path: str) -> None:
    """A NaN equals no other NaN: keyed by value, every call with a fresh ``float("nan")`` made a new plan and a new
    entry in the kernel's compiled caches (which have no cap). Keyed by bits, the calls share one."""
    x = tile.ones(f32, [64])
    z = tile.zeros(f32, [64]).partition([32])
    kernel = kernels.scale_by_const
    sizes = []
    for _ in range(5):
        z, x, _ = kernel(z, x, float("nan")).sync()
        sizes.append((len(kernel._plans), len(kernel._by_layout), len(kernel._cache)))
    assert np.isnan(z.unpartition().to_numpy()).all()
    assert sizes == sizes[:1] * 5


@pytest.mark.parametrize("combine", ["then", "map", "zip"])
def test_a_launch_in_a_chain_dropped_unrun_hands_back_its_pending_counts(
    kernels: ModuleType, path: str, combine: str
) -> None:
    x = tile.ones(f32, [64])
    keep = x[0:32]  # a view: another handle of the storage the launch holds
    storage = x._storage
    op = kernels.scale_by_const(tile.zeros(f32, [64]).partition([32]), x, 2.0)
    if combine == "then":
        chain = op.then(lambda out: kernels.scale_by_const(out[0], out[1], 3.0))
    elif combine == "map":
        chain = op.map(lambda out: out)
    else:
        chain = aio.zip(op)
    assert storage.pending == 1
    del op, chain, x
    gc.collect()
    assert storage.pending == 0, "the un-run launch kept its pending count"
    keep.free()
    assert storage.dropped, "the free stayed deferred"


def _driver_work(stream: tc.Stream) -> dict[str, Callable[[], object]]:
    """One tile.core call of each kind that reaches the driver, on simulated memory and the built-in kernel."""
    vec_add = tc.Module.from_cubin(sm90_cubin()).function("vec_add")
    buffer = tc.DeviceBuffer.allocate(512, stream=stream)
    args = [buffer, 128, 1] * 3
    prepared = tc.prepare(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=stream)
    prepared()  # made and run outside: inside, only the relaunch is asked for
    return {
        "allocate": lambda: tc.DeviceBuffer.allocate(64, stream=stream),
        "copy": lambda: tc.copy(buffer, np.zeros(512, np.uint8), stream=stream),
        "launch": lambda: tc.launch(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=stream),
        "prepare": lambda: tc.prepare(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=stream),
        "relaunch": prepared,
        "synchronize": stream.synchronize,
        "stream": tc.Stream,
        "event": lambda: tc.Event().record(stream),
        "module": lambda: tc.Module.from_cubin(sm90_cubin()),
    }


@pytest.mark.parametrize(
    "work", ["allocate", "copy", "launch", "prepare", "relaunch", "synchronize", "stream", "event", "module"]
)
def test_tile_core_refuses_driver_work_inside_a_host_function(sim: SimDriver, work: str) -> None:
    from tile import aio

    stream = tc.Stream()
    ctx = aio.CudaContext(stream)
    call = _driver_work(stream)[work]
    seen: list[BaseException] = []

    def host_fn() -> None:
        try:
            call()
        except tc.TileError as exc:
            seen.append(exc)
            raise

    with pytest.raises(tc.HostFunctionError, match=r"inside a CUDA host function.*after the host function"):
        aio.host_call(host_fn).sync_on(ctx)
    assert sim.bugs == [], "a driver call was made inside the host function"
    assert [type(e) for e in seen] == [tc.HostFunctionError]
    call()  # outside a host function the same call is fine
    stream.synchronize()
