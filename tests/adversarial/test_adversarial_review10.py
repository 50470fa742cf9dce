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
  non-powers of two before any launch.
- cached torch views (gloo, and the driver simulator for device storages): a view is keyed by the handle's byte
  range, dtype and shape, so a reshape, a slice or a retyped tensor of the same storage gets its own; a free drops
  the cache before the memory goes (also deferred behind a pending op); a moved or freed handle is refused before a
  view is looked up; the bodies keep the views only for the op (no user code receives them).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.frontend import _accel

sys.path.insert(0, str(Path(__file__).parent))
from helpers_adversarial import load_source  # a sibling helper module

BUILT = _accel.compiled() is not None
PATHS = ["pure", pytest.param("compiled", marks=pytest.mark.skipif(not BUILT, reason=_accel.reason()))]
INTS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
FLOATS = ["f16", "bf16", "f32", "f64"]


@pytest.fixture(autouse=True)
def _cpu() -> None:
    tile.set_backend("cpu")


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test runs once per launch path, switched in-process and restored after."""
    previous = _accel.use(request.param)
    yield request.param
    _accel.use(previous)


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
    kind that takes its whole range, as the same bits."""
    from tile.core._args import KINDS, kernel_params, pack_args
    from tile.frontend._signature import int_range

    kind = _abi_kind(getattr(scalars, f"put_{name}"), name)
    assert kind in KINDS, f"{name} scalars pack as {kind!r}, which tile.core does not know"
    lo, hi = int_range(_dtype(name))
    bits = _dtype(name).bits
    for value in (lo, -1 if lo else 1, 0, hi):
        packed = pack_args([value], [kind])
        block, _ = kernel_params(packed)
        cell = int.from_bytes(bytes(block)[: KINDS[kind].size], "little")
        assert cell % 2**bits == value % 2**bits  # the bits the kernel reads


@pytest.fixture
def gpu() -> Iterator[None]:
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


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
