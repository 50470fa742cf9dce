"""Every ownership and argument rule, broken on purpose: each misuse gets its typed error, with the site and the
fix in the message, before anything is moved or touched (the handles stay usable after the error)."""

from __future__ import annotations

import ctypes
import pickle
import re
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.aio import OpConsumedError
from tile.bindings import TileError
from tile.compiler import CompileError
from tile.frontend import f16, f32, i32

N = 1024
THIS = __file__.rsplit("/", 1)[-1]


def promised(info: pytest.ExceptionInfo[TileError], fix: str, *, site: bool = True) -> None:
    """The docstring's promise: the message names a line of the user's code (this file) and says what to do."""
    message = str(info.value)
    assert not site or re.search(rf"{THIS}:\d+", message), f"no user line in: {message}"
    assert fix in message, f"no fix {fix!r} in: {message}"


def _vec(n: int = N, value: float = 1.0) -> tile.Tensor:
    return tile.full(f32, [n], value)


def _out(n: int = N, tile_n: int = 128) -> tile.Partition:
    return tile.zeros(f32, [n]).partition([tile_n])


# -- moved handles ------------------------------------------------------------------------------------------------


def test_input_reused_after_launch_names_the_launch_site(k: ModuleType) -> None:
    x, y, z = _vec(), _vec(), _out()
    op = k.add(z, x, y)
    with pytest.raises(tile.MovedError, match=rf"moved into the launch of add at .*{THIS}:\d+") as info:
        x.to_numpy()
    assert ".sync()" in str(info.value)
    op.sync()


def test_partition_reused_after_launch(k: ModuleType) -> None:
    x, y, z = _vec(), _vec(), _out()
    k.add(z, x, y).sync()
    with pytest.raises(tile.MovedError, match=r"Partition\(f32, \[1024\] in tiles of \[128\]\) was moved") as info:
        z.unpartition()
    promised(info, "use the handles the launch returned")


def test_moved_handle_passed_to_a_second_launch(k: ModuleType) -> None:
    x, y, z = _vec(), _vec(), _out()
    _, _, y2 = k.add(z, x, y).sync()
    with pytest.raises(tile.MovedError, match=rf"moved into the launch of add at .*{THIS}:\d+") as info:
        k.add(_out(), x, y2)
    assert "use the handles the launch returned" in str(info.value)
    assert not y2.moved  # the failed call moved nothing


def test_returned_handles_are_live(k: ModuleType) -> None:
    z, x, y = k.add(_out(), _vec(), _vec()).sync()
    assert not (z.moved)
    assert not (x.moved)
    assert not (y.moved)
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 2.0, np.float32))


def test_tensor_used_after_partition() -> None:
    t = _vec()
    t.partition([128])
    with pytest.raises(tile.MovedError, match=r"moved into \.partition\(\)") as info:
        t.to_numpy()
    promised(info, "use the handle it returned")


def test_partition_a_moved_tensor() -> None:
    t = _vec()
    t.partition([128])
    with pytest.raises(tile.MovedError, match=rf"moved into \.partition\(\) at .*{THIS}:\d+") as info:
        t.partition([128])
    assert ".unpartition()" in str(info.value)


def test_unpartition_twice() -> None:
    p = _out()
    p.unpartition()
    with pytest.raises(tile.MovedError, match="unpartitioned at") as info:
        p.unpartition()
    promised(info, "use the Tensor that .unpartition() returned")


@pytest.mark.parametrize("use", ["view", "reshape", "permute", "dlpack", "copy", "free", "data_ptr"])
def test_every_method_of_a_moved_tensor_refuses(use: str) -> None:
    t = tile.zeros(f32, [4, 8])
    t.partition([4, 8])
    calls: dict[str, Any] = {
        "view": lambda: t[0],
        "reshape": lambda: t.reshape(32),
        "permute": lambda: t.permute(1, 0),
        "dlpack": lambda: np.from_dlpack(t),
        "copy": t.copy,
        "free": t.free,
        "data_ptr": t.data_ptr,
    }
    with pytest.raises(tile.MovedError, match=rf"created at .*{THIS}:\d+ was moved into \.partition\(\) at") as info:
        calls[use]()
    assert "use the handle it returned" in str(info.value)


def test_an_op_runs_once(k: ModuleType) -> None:
    op = k.add(_out(), _vec(), _vec())
    op.sync()
    with pytest.raises(OpConsumedError, match=rf"{THIS}:\d+") as info:
        op.sync()
    promised(info, "build a new op")


# -- freed memory -------------------------------------------------------------------------------------------------


def test_use_after_free() -> None:
    t = _vec()
    t.free()
    with pytest.raises(tile.FreedError, match="freed at") as info:
        t.to_numpy()
    promised(info, "make a new one")


def test_view_after_parent_freed() -> None:
    t = _vec()
    v = t[:16]
    t.free()
    with pytest.raises(tile.FreedError, match=rf"freed at .*{THIS}:\d+") as info:
        v.to_numpy()
    assert "make a new one" in str(info.value)


def test_launch_with_freed_tensor(k: ModuleType) -> None:
    x = _vec()
    x.free()
    with pytest.raises(tile.FreedError, match=rf"freed at .*{THIS}:\d+") as info:
        k.add(_out(), x, _vec())
    assert "make a new one" in str(info.value)


def test_free_waits_for_the_pending_launch(k: ModuleType) -> None:
    x = _vec(value=3.0)
    alias = x[:]
    storage = x._storage
    op = k.add(_out(), x, _vec())
    alias.free()  # another handle frees the storage while the launch still holds it
    kept = storage.host is not None
    assert kept
    assert storage.pending == 1
    z, _, _ = op.sync()
    assert storage.host is None
    assert storage.pending == 0
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 4.0, np.float32))


# -- partitions need exclusive memory -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make_view",
    [
        lambda t: t[100:200],
        lambda t: t.reshape(8, 128),
        lambda t: t.reshape(8, 128).T,
        lambda t: t[::2],
    ],
    ids=["slice", "reshape", "permute", "strided"],
)
def test_partition_while_a_view_is_alive(make_view: Any) -> None:
    t = _vec()
    view = make_view(t)
    with pytest.raises(tile.BorrowError, match=rf"created at .*{THIS}:\d+") as info:
        t.partition([128])
    promised(info, "Drop them first (`del view`), or partition a .copy()")
    assert not t.moved
    del view
    assert t.partition([128]).grid == (8,)


def test_partition_while_a_dlpack_export_is_alive() -> None:
    t = _vec()
    exported = np.from_dlpack(t)
    with pytest.raises(tile.BorrowError, match="DLPack export") as info:
        t.partition([128])
    promised(info, "Drop them first")
    del exported
    t.partition([128])


def test_partition_of_foreign_memory_borrowed_twice() -> None:
    a = np.zeros(N, np.float32)
    first, second = tile.from_dlpack(a), tile.from_dlpack(a[512:])
    with pytest.raises(tile.BorrowError, match=rf"exclusive memory.*created at .*{THIS}:\d+") as info:
        first.partition([128])
    assert "Drop them first" in str(info.value)
    del second
    first.partition([128])


def test_partition_of_read_only_foreign_memory() -> None:
    a = np.zeros(N, np.float32)
    a.flags.writeable = False
    with pytest.raises(tile.BorrowError, match="read-only") as info:
        tile.from_dlpack(a).partition([128])
    promised(info, "copy it with tile.from_numpy(...) or .copy() and partition the copy")


def test_disjoint_slices_partition_independently() -> None:
    t = _vec()
    left, right = t[:512], t[512:]
    del t
    assert left.partition([128]).grid == right.partition([128]).grid == (4,)


# -- aliasing between launch arguments ----------------------------------------------------------------------------


def test_same_partition_as_two_outputs(k: ModuleType) -> None:
    z = _out()
    with pytest.raises(tile.AliasError, match="output 'z1' and output 'z2'") as info:
        k.two_outputs(z, z, _vec())
    promised(info, "Pass separate tensors", site=False)  # about the call's arguments: the call is the site
    assert not z.moved


def test_a_borrow_of_an_output_cannot_be_made_so_it_cannot_be_an_input() -> None:
    """A partition holds its memory: a second borrow of it (to pass as an input, or to keep beside the launch) is
    refused before any launch, whichever part of it the borrow covers."""
    a = np.zeros(2 * N, np.float32)
    z = tile.from_dlpack(a[:N]).partition([128])
    for part in (a, a[N - 1 :], a[:8]):
        with pytest.raises(tile.BorrowError, match=r"a writer holds it, Partition\(f32, \[1024\]") as info:
            tile.from_dlpack(part)
        promised(info, "Give it back first (.unpartition() / .reclaim())")
    tile.from_dlpack(a[N:])  # the other half is not held
    del z


def test_an_output_overlapping_a_borrow_made_before_it_is_refused() -> None:
    a = np.zeros(N, np.float32)
    x = tile.from_dlpack(a[:8])
    with pytest.raises(tile.BorrowError, match=r"1 other live handle\(s\) overlap it") as info:
        tile.from_dlpack(a).partition([128])
    promised(info, "Drop them first")
    del x


def test_unchecked_kernels_reach_aliased_memory_through_raw_pointers(k: ModuleType) -> None:
    """The opt-out does not undo the one-handle rule of a partition's memory; a raw pointer is how an unchecked
    kernel reads what it writes, and the interpreter still sees the hazard."""
    from tile.ir.interp import InterpError

    t = tile.ones(f32, [N])
    address = t.data_ptr()
    op = k.read_pointer(t.partition([128]), address)  # each block reads the tile it writes
    with pytest.raises(InterpError, match="no token chain orders them"):
        op.sync()


@pytest.mark.parametrize("input_first", [False, True])
def test_an_input_right_beside_the_output_in_memory_is_not_an_alias(k: ModuleType, input_first: bool) -> None:
    """Byte ranges [lo, hi) and [hi, ...) touch but do not overlap. Mutants killed: either comparison of the
    overlap test of _ownership._check_output written with <= (adjacent halves of one buffer refused as aliases).
    The same mutants of _plan._overlaps only send the second call down the full path: equivalent."""
    n = 1280 if input_first else 1408  # extents no other test launches add with: the first call takes the full path
    for _ in range(2):
        a = np.zeros(2 * n, np.float32)
        first, second = a[:n], a[n:]
        inp, out = (first, second) if input_first else (second, first)
        inp[:] = 3.0
        z = tile.from_dlpack(out).partition([128])
        z, _, _ = k.add(z, tile.from_dlpack(inp), _vec(n)).sync()
        np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(n, 4.0, np.float32))
        del z


def test_one_tensor_as_two_inputs_is_shared_reading(k: ModuleType) -> None:
    x = _vec(value=2.0)
    z, x1, x2 = k.add(_out(), x, x).sync()
    assert x1 is x2
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 4.0, np.float32))


# -- grids --------------------------------------------------------------------------------------------------------


def test_outputs_disagree_about_the_grid(k: ModuleType) -> None:
    z1, z2 = _out(N, 128), tile.zeros(f32, [2 * N]).partition([128])
    with pytest.raises(tile.GridError, match="disagree") as info:
        k.two_outputs(z1, z2, _vec())
    promised(info, "partition them so every output has the same number of tiles per axis", site=False)


def test_no_output_and_no_grid(k: ModuleType) -> None:
    with pytest.raises(tile.GridError, match=r"no_output\.grid\(\(x, y, z\)\)"):
        k.no_output(_vec())


def test_explicit_grid_contradicting_the_outputs(k: ModuleType) -> None:
    with pytest.raises(tile.GridError, match="differs") as info:
        k.add.grid((4,))(_out(), _vec(), _vec())
    promised(info, "drop .grid(...), repartition the output", site=False)


def test_input_shorter_than_the_output_grid(k: ModuleType) -> None:
    x, y, z = _vec(N // 2), _vec(), _out()
    with pytest.raises(tile.GridError, match=r"x\.partition\(\(128,\)\) along dim 0 at .*fe_kernels\.py:\d+") as info:
        k.add(z, x, y)
    assert "the launch grid has 8 block(s) along x" in str(info.value)
    assert "x of shape (512,) has only 4 tile(s)" in str(info.value)
    promised(info, "pass tensors whose shapes agree with each other and with the grid", site=False)
    assert [x.moved, y.moved, z.moved] == [False] * 3  # checked before anything moved


def test_explicit_grid_past_the_input(k: ModuleType) -> None:
    x = _vec()
    with pytest.raises(tile.GridError, match=r"tile indices up to 15 \(the launch grid has 16 block\(s\) along x\)"):
        k.no_output.grid((16,))(x)
    k.no_output.grid((8,))(x).sync()


def test_gemm_inner_dimensions_disagree(k: ModuleType) -> None:
    x, y = tile.ones(f16, [64, 128]), tile.ones(f16, [64, 64])
    z = tile.zeros(f32, [64, 64]).partition([32, 32])
    with pytest.raises(tile.ArgumentError, match=r"y\.partition\(\(32, 32\)\) along dim 0") as info:
        k.gemm(z, x, y, BK=32)
    assert "(x.partition((32, 32)) has 4 tile(s) along dim 1)" in str(info.value)
    assert "y of shape (64, 64) has only 2 tile(s) along dim 0" in str(info.value)
    promised(info, "pass tensors whose shapes agree with each other and with the grid", site=False)
    assert [x.moved, y.moved, z.moved] == [False] * 3


@pytest.mark.parametrize("grid", [(0,), (1, 2, 3, 4), "8", (2.0,), (1, 70000)])
def test_malformed_grids(k: ModuleType, grid: Any) -> None:
    with pytest.raises(tile.GridError, match=r"a grid is 1 to 3 positive ints|out of range") as info:
        k.no_output.grid(grid)(_vec())
    assert "grid" in str(info.value)


# -- arguments against the signature ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make_args", "pattern"),
    [
        (lambda: (_out(), tile.ones(f16, [N]), _vec()), "dtype f16 but the kernel declares f32"),
        (lambda: (tile.zeros(i32, [N]).partition([128]), _vec(), _vec()), "dtype i32"),
        (lambda: (_out(), tile.ones(f32, [32, 32]), _vec()), "rank 2"),
        (
            lambda: (tile.zeros(f32, [N]), _vec(), _vec()),
            r"needs a Partition, got a Tensor: pass z\.partition\(\(B,\)\)",
        ),
        (lambda: (_out(), _out(), _vec()), "read-only input but got a Partition"),
        (lambda: (_out(), np.ones(N, np.float32), _vec()), "needs a tile Tensor, got ndarray"),
        (lambda: (_out(), _vec()), "takes 3 arguments but 2 were given"),
        (lambda: (_out(), _vec(), _vec(), _vec()), "takes 3 arguments but 4"),
    ],
    ids=["input-dtype", "output-dtype", "rank", "tensor-for-mut", "partition-for-input", "numpy", "few", "many"],
)
def test_argument_mismatch(k: ModuleType, make_args: Any, pattern: str) -> None:
    args = make_args()
    with pytest.raises(tile.ArgumentError, match=pattern):
        k.add(*args)
    assert not any(getattr(a, "moved", False) for a in args)


def test_static_extent_mismatch(k: ModuleType) -> None:
    with pytest.raises(tile.ArgumentError, match=r"is 512 but the kernel declares 1024"):
        k.static_input(tile.zeros(f32, [512]).partition([128]), _vec(512))


def test_static_tile_mismatch(k: ModuleType) -> None:
    with pytest.raises(tile.ArgumentError, match=r"tile shape of 'z' .* is 64 but the kernel declares 128"):
        k.static_input(_out(tile_n=64), _vec())


def test_generic_inferred_twice_differently(k: ModuleType) -> None:
    with pytest.raises(tile.ArgumentError, match="const generic B is 64 from the keyword argument but 128"):
        k.add(_out(), _vec(), _vec(), B=64)


def test_keyword_generic_contradicting_a_static_extent(k: ModuleType) -> None:
    with pytest.raises(tile.ArgumentError, match="const generic N is 512 from the keyword argument but 1024"):
        k.generic_input(_out(), _vec(), N=512)


def test_unknown_keyword(k: ModuleType) -> None:
    with pytest.raises(tile.ArgumentError, match="not const generics"):
        k.add(_out(), _vec(), _vec(), BLOCK=64)


@pytest.mark.parametrize(
    ("value", "pattern"), [(1.5, "i32 scalar, got float"), (2**40, "does not fit in i32"), (True, "got bool")]
)
def test_int_scalar_mismatch(k: ModuleType, value: Any, pattern: str) -> None:
    with pytest.raises(tile.ArgumentError, match=pattern):
        k.scale_int(_out(), _vec(), value)


def test_float_scalar_rejects_a_tensor(k: ModuleType) -> None:
    with pytest.raises(tile.ArgumentError, match="f32 scalar, got Tensor"):
        k.axpy(_out(), _vec(), _vec(), _vec())


def test_const_of_the_wrong_type(k: ModuleType) -> None:
    with pytest.raises(tile.ArgumentError, match=r"Const\[int\], got 2.5"):
        k.with_const(_out(), _vec(), 2.5)


def test_raw_pointer_needs_an_unchecked_kernel(k: ModuleType) -> None:
    x = _vec()
    with pytest.raises(tile.ArgumentError, match="unchecked=True"):
        k.raw_pointer(_out(), x.data_ptr())


def test_compile_error_leaves_the_handles_usable(k: ModuleType) -> None:
    x, z = _vec(), _out()
    with pytest.raises(CompileError, match="undefined_name"):
        k.bad_kernel(z, x)
    assert not x.moved
    assert not z.moved


def test_unannotated_kernel_parameter() -> None:
    def kernel(z, x):  # type: ignore[no-untyped-def]  # the missing annotation is the point
        pass

    with pytest.raises(tile.ArgumentError, match="needs an annotation"):
        tile.entry(kernel)


# -- partitions and views -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "tile_shape", "pattern"),
    [
        ([N], [100], r"powers of two .*got \[100\]: use \[128\], a tile may run past the tensor's end"),
        ([N, N], [4, 24], r"use \[4, 32\]"),  # the next power of two per dim
        ([N], [0], r"powers of two \(Tile IR tiles are\); got \[0\]$"),  # no suggestion for a non-positive extent
        ([N], [128, 1], "rank 2 but"),
        ([2, 2, 2, 2], [1, 1, 1, 1], "rank 1 to 3"),
        ([0], [128], "empty"),
    ],
)
def test_bad_partitions(shape: list[int], tile_shape: list[int], pattern: str) -> None:
    t = tile.zeros(f32, shape)
    with pytest.raises(tile.ArgumentError, match=pattern):
        t.partition(tile_shape)
    assert not t.moved


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (lambda t: t.T.reshape(64), "contiguous"),
        (lambda t: t.reshape(7, 9), "cannot reshape"),
        (lambda t: t[8], "out of bounds"),
        (lambda t: t[:, ::-1], "positive step"),
        (lambda t: t[0, 0, 0], "too many indices"),
        (lambda t: t.permute(0, 0), "not a permutation"),
        (lambda t: t["a"], "not an int or a slice"),
    ],
)
def test_bad_views(make: Any, pattern: str) -> None:
    with pytest.raises(tile.ArgumentError, match=pattern):
        make(tile.zeros(f32, [8, 8]))


def test_unknown_dtype() -> None:
    with pytest.raises(tile.ArgumentError, match="is not a dtype"):
        tile.zeros("float7", [4])


def test_gpu_backend_without_a_gpu() -> None:
    if tile.gpu_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(tile.BackendError, match="set_backend\\('cpu'\\)"):
        tile.set_backend("gpu")


def test_errors_are_tile_errors_and_pickle() -> None:
    err = tile.MovedError("Tensor(f32, [4])", "moved into the launch of add at x.py:3", "use what .sync() returned")
    back = pickle.loads(pickle.dumps(err))
    assert isinstance(back, TileError)
    assert isinstance(back, RuntimeError)
    assert str(back) == str(err)
    for cls in (tile.AliasError, tile.BorrowError, tile.ArgumentError, tile.GridError, tile.BackendError):
        assert issubclass(cls, TileError)
        assert str(pickle.loads(pickle.dumps(cls("message")))) == "message"


def test_dtype_generic_bound_twice_differently(k: ModuleType) -> None:
    with pytest.raises(tile.ArgumentError, match="dtype generic T is f16 from the dtype of 'z' but f32"):
        k.copy_any(tile.zeros(f16, [N]).partition([128]), _vec())


def test_freed_storage_aliases_nothing() -> None:
    stale = tile.from_dlpack(np.zeros(8, np.float32))  # a foreign borrow makes every partition scan all storages
    freed = tile.zeros(f32, [N])
    freed.free()
    fresh = tile.zeros(f32, [N])  # may reuse the freed range
    assert fresh.partition([128]).grid == (8,)
    del stale, freed


def test_const_given_by_position_and_keyword(k: ModuleType) -> None:
    with pytest.raises(tile.ArgumentError, match=r"multiple values for \['k'\]"):
        k.with_const(_out(), _vec(), 2, k=2)


def test_a_launch_dropped_unexecuted_lets_a_deferred_free_happen(k: ModuleType) -> None:
    x = _vec()
    alias = x[:]
    storage = x._storage
    op = k.add(_out(), x, _vec())
    alias.free()
    assert storage.host is not None
    del op
    assert storage.host is None


def test_the_interpreter_catches_the_race_an_unchecked_kernel_allows(k: ModuleType) -> None:
    from tile.ir.interp import DataRaceError

    t = tile.zeros(f32, [N + 128])
    address, head = t.data_ptr(), t[:N]
    del t
    z = head.partition([128])
    race = r"data race on [pz] element \d+ .* tile block \(1, 0, 0\) writes it at .*fe_kernels\.py:\d+"
    with pytest.raises(DataRaceError, match=race) as info:
        k.read_pointer(z, address + 128 * 4).sync()  # block i reads the tile block i + 1 writes
    assert isinstance(info.value, tile.KernelFaultError)


def test_shared_tensors_are_read_only_and_unshare_waits(k: ModuleType) -> None:
    w = _vec().share()
    with pytest.raises(tile.ArgumentError, match="Shared tensor, which is read-only"):
        k.add(w, _vec(), _vec())
    alias = np.ctypeslib.as_array((ctypes.c_float * N).from_address(w._tensor.data_ptr()))  # writable, foreign
    # the share is a live borrow of its memory
    with pytest.raises(tile.BorrowError, match=r"but 1 other live handle\(s\) overlap it"):
        tile.from_dlpack(alias).partition([128])
    op = k.add(_out(), w, _vec())
    with pytest.raises(tile.BorrowError, match="1 launch"):
        w.unshare()
    op.sync()
    t = w.unshare()
    with pytest.raises(tile.MovedError, match="unshared at"):
        w.to_numpy()
    assert t.to_numpy().sum() == N
