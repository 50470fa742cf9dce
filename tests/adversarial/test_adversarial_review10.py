"""Review 10: the code added on the day of review 9 (cached torch views in tile.distributed, ``_borrow3`` of
tile.kernels.attention, the GEMV form ``gemv_wx`` and its split-K, the tuner's graph per decode config) and the
launch fast path's scalar decision, at its edges. Each hole's test names it in its docstring, failed before its fix,
and asserts the typed error. They run on the CPU interpreter, on both launch paths (the ``path`` fixture switches
in-process; ``TILE_PURE_PYTHON=1`` runs the whole module on the pure one); the GPU test is marked ``gpu``.

Attempts that turned out already closed (the most important have a test below):

- scalars at the integer range edges for every int dtype (i8..i64, u8..u64), one past them, huge ints, ``True``
  for an int parameter, numpy scalars (np.int64, np.uint64, np.float32, np.bool_, np.int8), nan and inf for an int
  parameter: the fast path (both launch paths, a plan already made) and the full check decide the same, and a
  refused call leaves the partition usable; on the CPU interpreter every accepted value is stored exactly.
- gemv configs picked by hand on the interpreter (its bounds checks on): FORM 3 with BM 1, 4, 8, 16, 32 for M up to
  16, SPLIT 1..16 (odd ones, and more runs than K has tiles), BK/BN larger than K/N, FORM 1 with BM 8, FORM 2 with
  BM 1, N and K not multiples of the tiles: every result matches numpy. The kernels load through zero-padded
  partitions and walk ``range(num_tiles)``, so no config reaches past K or N; ``_check_config`` refuses
  non-powers of two before any launch. ``out=`` equal to or overlapping an input, with split-K, is refused by the
  partition's exclusivity check (BorrowError) and both tensors keep their values.
- tile.kernels.attention's ``_borrow3``: a freed or lent 4-D input is refused by the reshape's handle check
  (FreedError / MovedError), a strided one by attention (ArgumentError), an in-flight one goes through
  ``as_input``; q, k and v may be one tensor or overlapping views (all are read; attention has no ``out=``).
- the matmul tuner's graph per decode config: it captures scratch operands only (never the caller's, which may be
  in flight), a timer that raises mid-tuning leaves the caller's inputs and ``out=`` live and unwritten, every
  graph is closed in ``finally``, and a sample function the timer kept raises ClosedError afterwards.
- cached torch views (gloo, and the driver simulator for device storages): a view is keyed by the handle's byte
  range, dtype and shape, so a reshape, a slice or a retyped tensor of the same storage gets its own; a free drops
  the cache before the memory goes (also deferred behind a pending op); a moved or freed handle is refused before a
  view is looked up; the bodies keep the views only for the op (no user code receives them); read-only borrowed
  memory is never written (BorrowError before the cache is reached); memory allocated again after a free is a new
  storage with no views.

Left as is (value semantics, not safety): an int or float beyond a narrow float's range (1e30 for an f16 scalar)
becomes inf, as numpy and torch convert it; numpy's overflow warning is raised as an error only under a warnings
filter that asks for it (then when the launch runs).
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile import aio
from tile.frontend import f32

sys.path.insert(0, str(Path(__file__).parent))
from helpers_adversarial import load_source  # a sibling helper module

INTS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
FLOATS = ["f16", "bf16", "f32", "f64"]


@pytest.fixture(autouse=True)
def _cpu() -> None:
    tile.set_backend("cpu")


@pytest.fixture(scope="module")
def scalars(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """One kernel per scalar dtype: ``put_<dtype>(z, s)`` stores ``s`` into every element of ``z`` (of that dtype)."""
    names = ", ".join(INTS + FLOATS)
    source = f"import tile.frontend as tile\nfrom tile.frontend import Mut, Tensor, {names}\n"
    for name in INTS + FLOATS:
        source += (
            f'\n\n@tile.entry\ndef put_{name}(z: Mut[Tensor[{name}, "B"]], s: {name}):\n    z.store(z.load() * 0 + s)\n'
        )
    return load_source("review10_scalar_kernels", source, tmp_path_factory.mktemp("review10"))


def _dtype(name: str) -> Any:
    return getattr(tile, name)


# -- 1. a scalar the check accepts but the launch cannot pack ---------------------------------------------------------


@pytest.mark.parametrize("name", FLOATS)
def test_an_int_too_large_for_any_float_is_refused_before_the_move(scalars: ModuleType, path: str, name: str) -> None:
    """Hole: a float scalar's check (and the fast path, which passed every int without a check) took any int, but an
    int of 2**1024 or more converts to no float: the launch was made, moving the partition, and failed when it ran
    (the interpreter's and tile.core's packing raised an untyped OverflowError), so the user's tensor was gone. Now
    the check refuses such an int with a typed error before anything is moved, on both paths and with a plan made."""
    kernel = getattr(scalars, f"put_{name}")
    z = tile.zeros(_dtype(name), [4]).partition((4,))
    z, _ = kernel(z, 3).sync()  # makes the plan: the next calls take the fast path
    for huge in (2**1024, -(2**1024), 10**400):
        with pytest.raises(tile.ArgumentError, match=r"does not fit in any float: pass float\(s\) or a smaller"):
            kernel(z, huge)
    z, s = kernel(z, 5).sync()  # the partition was never moved: it takes the next call
    assert s == 5
    assert z.unpartition().to_numpy().astype(np.float64).tolist() == [5.0] * 4


def test_the_largest_int_a_float_holds_passes(scalars: ModuleType, path: str) -> None:
    """The bound is the float range, not a cut below it: 2**1024 - 2**970 - 1 rounds to the largest f64."""
    z = tile.zeros(tile.f64, [4]).partition((4,))
    for value in (3, 2**1024 - 2**970 - 1, -(2**1024 - 2**970 - 1)):
        z, s = scalars.put_f64(z, value).sync()
        assert s == value
        z = z.unpartition()
        assert z.to_numpy().tolist() == [float(value)] * 4
        z = z.partition((4,))


@pytest.mark.parametrize("name", INTS)
def test_int_scalars_at_the_range_edges_agree_on_both_paths(scalars: ModuleType, path: str, name: str) -> None:
    """Closed: with a plan made (the fast scalar decision: `_plan._passes`, `_fastlaunch.passes`), each edge of the
    dtype's range and each numpy integer scalar in it is stored exactly, and one past an edge, a bool, a numpy float
    and nan are refused by the check's typed error with the partition left usable."""
    from tile.frontend._signature import int_range

    kernel = getattr(scalars, f"put_{name}")
    lo, hi = int_range(_dtype(name))
    z = tile.zeros(_dtype(name), [4]).partition((4,))
    z, _ = kernel(z, 1).sync()
    for value in (lo, hi, np.int64(max(lo, -(2**63))), np.uint64(min(hi, 2**64 - 1)), np.int8(1)):
        z, s = kernel(z, value).sync()
        assert s == value
        z = z.unpartition()
        assert [int(v) for v in z.to_numpy()] == [int(value)] * 4
        z = z.partition((4,))
    for value in (lo - 1, hi + 1, 10**400):
        with pytest.raises(tile.ArgumentError, match=rf"= {value} does not fit in {name}"):
            kernel(z, value)
    for bad in (True, np.bool_(True), np.float32(1.0), float("nan")):
        with pytest.raises(tile.ArgumentError, match=rf"is a {name} scalar, got {type(bad).__name__}"):
            kernel(z, bad)
    z, _ = kernel(z, 2).sync()
    assert [int(v) for v in z.unpartition().to_numpy()] == [2] * 4


def _abi_kind(kernel: Any, name: str) -> str:
    """The tile.core parameter kind the GPU launch packs the kernel's scalar slot as (its sm_90 entry ABI, compiled to
    bytecode only: no tileiras needed)."""
    import tile.compiler as tc
    from tile.frontend._execute import GPU_KIND

    compiled = tc.compile_kernel(kernel.fn, tc.Specialization.make(consts={"B": 4}), target="sm_90", cubin=False)
    (slot,) = [s for s in compiled.abi.slots if s.role == "value"]
    assert slot.dtype == name
    return GPU_KIND.get(slot.dtype, slot.dtype)


@pytest.mark.parametrize("name", INTS)
def test_every_int_scalar_the_check_accepts_packs_for_the_gpu(scalars: ModuleType, name: str) -> None:
    """Hole: on the GPU the launch packs an integer scalar as a tile.core kind (``_execute.GPU_KIND``): u8 and u16 had
    none (tile.core raised an untyped KeyError for the kind "u8"), u32 went as i32 and u64 as i64, whose converters
    refuse the upper half of the unsigned range (u32 4294967295: LaunchArgumentError). The check passes those
    values, so the launch was made, moving the partition, and failed only when it ran. Now every integer dtype has a
    kind that takes its whole range, as the same bits, in a cell as wide as the parameter tileiras makes of the IR
    dtype (the GPU test below found i8/i16/u8/u16 widened to 4 bytes refused by the cubin's 1- and 2-byte
    parameters)."""
    from tile.core._args import KINDS, pack_args
    from tile.core._params import kernel_params
    from tile.frontend._signature import int_range

    kind = _abi_kind(getattr(scalars, f"put_{name}"), name)
    assert kind in KINDS, f"{name} scalars pack as {kind!r}, which tile.core does not know"
    lo, hi = int_range(_dtype(name))
    bits = _dtype(name).bits
    assert KINDS[kind].size == bits // 8, f"a {name} parameter has {bits // 8} bytes in the cubin"
    for value in (lo, -1 if lo else 1, 0, hi):
        packed = pack_args([value], [kind])
        block, address = kernel_params(packed)  # `block` holds the cells `address` points at
        cell = int.from_bytes(ctypes.string_at(ctypes.c_void_p.from_address(address).value or 0, 8), "little")
        assert cell % 2**bits == value % 2**bits  # the bits the kernel reads
        del block


@pytest.mark.gpu
@pytest.mark.requires_tileiras
@pytest.mark.parametrize("name", INTS)
def test_gpu_int_scalars_at_their_range_edges_reach_the_kernel(scalars: ModuleType, gpu: None, name: str) -> None:
    """The launch above on the GPU: each edge of each integer dtype's range is stored exactly (the upper half of u32
    and u64 failed in tile.core's packing, u8 and u16 had no kind)."""
    from tile.frontend._signature import int_range

    kernel = getattr(scalars, f"put_{name}")
    z = tile.zeros(_dtype(name), [4]).partition((4,))
    for value in int_range(_dtype(name)):
        z, s = kernel(z, value).sync()
        assert s == value
        z = z.unpartition()
        assert [int(v) for v in z.to_numpy()] == [value] * 4
        z = z.partition((4,))


# -- 2. tile.kernels.attention borrowing a 4-D input as its 3-D reshape (closed) -------------------------------------


def _softmax_attention(q: np.ndarray[Any, Any], k: np.ndarray[Any, Any], v: np.ndarray[Any, Any]) -> Any:
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def test_attention_borrows_only_a_live_contiguous_4d_input() -> None:
    """Closed: ``_borrow3`` reshapes a 4-D Tile tensor itself (no view first); the reshape checks the handle, so a
    freed or lent input is refused by its typed error, a strided one by attention's, and q, k and v may be one
    tensor (all read)."""
    import tile.kernels as tk

    rng = np.random.default_rng(0)
    data = rng.standard_normal((1, 2, 16, 16)).astype(np.float16)
    q = tile.from_numpy(data)
    z = tk.attention(q, q, q, causal=False)
    np.testing.assert_allclose(z.to_numpy().astype(np.float64), _softmax_attention(data, data, data), atol=2e-3)
    freed = tile.from_numpy(data)
    freed.free()
    with pytest.raises(tile.FreedError, match="views memory that was freed"):
        tk.attention(freed, q, q, causal=False)
    lent = tile.from_numpy(data)
    loan = lent.lend()
    with pytest.raises(tile.MovedError, match=r"was moved into \.lend\(\)"):
        tk.attention(lent, q, q, causal=False)
    del loan
    wide = tile.from_numpy(rng.standard_normal((1, 2, 16, 32)).astype(np.float16))
    with pytest.raises(tile.ArgumentError, match=r"q of shape \[1, 2, 16, 16\] is a strided view; pass a contiguous"):
        tk.attention(wide[:, :, :, :16], q, q, causal=False)
    assert q.to_numpy().tolist() == data.tolist()


# -- 4. the matmul tuner's graphs (closed) -----------------------------------------------------------------------------


def test_a_failing_tuner_leaves_the_callers_tensors_and_closes_its_graphs(tmp_path: Path) -> None:
    """Closed: the decode tuner times graphs of scratch operands; a timer that raises mid-tuning leaves the caller's
    inputs and ``out=`` live and unwritten, and a sample function it kept refuses to replay its closed graph."""
    import tile.kernels as tk
    from tile.kernels import _gemm_configs, autotune
    from tile.kernels.autotune import Autotuner

    kept: list[Any] = []

    def timer(fn: Any) -> float:
        kept.append(fn)
        fn()
        if len(kept) == 3:
            raise RuntimeError("the timer broke")
        return float(len(kept))

    old = autotune.set_tuner("matmul", Autotuner("matmul", source="s", timer=timer, cache_dir=tmp_path))
    try:
        a, b = tile.ones(f32, [2, 40]), tile.ones(f32, [40, 3])
        out = tile.zeros(f32, [2, 3])
        with pytest.raises(RuntimeError, match="the timer broke"):
            tk.matmul(a, b, out=out)
        for fn in kept:
            with pytest.raises(aio.ClosedError, match="this graph is closed"):
                fn()
        assert out.to_numpy().tolist() == [[0.0] * 3] * 2
        z = tk.matmul(a, b, out=out, config=_gemm_configs.default(2, 3, 40))
        assert z.to_numpy().tolist() == [[40.0] * 3] * 2
    finally:
        autotune.set_tuner("matmul", old)


# -- 1b. tile.distributed's cached torch views (closed) ----------------------------------------------------------------


@pytest.fixture(scope="module")
def gloo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    pytest.importorskip("torch")
    import tile.frontend.distributed as d

    d.init("gloo", init_method=f"file://{tmp_path_factory.mktemp('gloo') / 'store'}", rank=0, world_size=1)
    yield
    d.destroy()


def test_memory_reused_after_a_free_gets_no_cached_view(gloo: None) -> None:
    """Closed: the views live in the `Storage`, which a free drops them from; memory allocated again (at the same
    address or not) is a new storage, so an op on it makes its own view of its own bytes, never the freed one's."""
    import tile.frontend.distributed as d

    freed = []
    for i in range(8):
        t = d.all_reduce(tile.full(f32, [256], float(i))).sync()
        assert t._storage.foreign_views
        freed.append((t.data_ptr(), t._storage))
        t.free()
        assert freed[-1][1].foreign_views is None
    addresses = {address for address, _ in freed}
    fresh = tile.full(f32, [256], 5.0)
    assert fresh._storage.foreign_views is None  # (its address may be one of `addresses`)
    fresh = d.all_reduce(fresh).sync()
    assert fresh.to_numpy().tolist() == [5.0] * 256
    assert all(s.foreign_views is None for _, s in freed)
    assert addresses
