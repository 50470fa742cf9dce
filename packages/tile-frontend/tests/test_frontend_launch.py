"""Launches on the CPU interpreter backend: results against numpy, views and strides as arguments, edge tiles,
generics, the DeviceOp terminals (sync, sync_on, await, then, graph) and compile-only warm-up."""

from __future__ import annotations

import asyncio
import dataclasses
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.aio import HostStream
from tile.frontend import bf16, f16, f32, i32
from tile.ir.interp import KernelAssertionError

N = 1000


def test_add_returns_all_arguments_in_order(k: ModuleType) -> None:
    x, y = tile.rand(f32, [N]), tile.rand(f32, [N])
    expected = x.to_numpy() + y.to_numpy()
    z, x2, y2 = k.add(tile.empty(f32, [N]).partition([128]), x, y).sync()
    assert isinstance(z, tile.Partition)
    assert isinstance(x2, tile.Tensor)
    assert isinstance(y2, tile.Tensor)
    np.testing.assert_array_equal(z.unpartition().to_numpy(), expected)


def test_scalars_and_consts(k: ModuleType) -> None:
    x = tile.arange(f32, N)
    z, a, x, _ = k.axpy(tile.empty(f32, [N]).partition([256]), 0.5, x, tile.ones(f32, [N])).sync()
    assert a == 0.5
    np.testing.assert_allclose(z.unpartition().to_numpy(), 0.5 * np.arange(N) + 1)
    z, x, _ = k.scale_int(tile.empty(f32, [N]).partition([64]), x, 3).sync()
    np.testing.assert_allclose(z.unpartition().to_numpy(), 3 * np.arange(N))
    z, x, _ = k.with_const(tile.empty(f32, [N]).partition([64]), x, k=4).sync()
    np.testing.assert_allclose(z.unpartition().to_numpy(), 4 * np.arange(N))


def test_edge_tiles_are_masked_and_views_keep_their_offsets(k: ModuleType) -> None:
    host = np.full((128, 128), -1.0, np.float32)
    out = tile.from_dlpack(host)[10:110, 5:75].partition([32, 16])  # 100 x 70: neither extent divides
    src = np.random.default_rng(1).random((200, 90)).astype(np.float32)
    x = tile.from_numpy(src)[50:150, 3:73]
    assert out.grid == (4, 5)
    k.matrix_copy(out, x).sync()
    np.testing.assert_array_equal(host[10:110, 5:75], src[50:150, 3:73])
    host[10:110, 5:75] = -1.0
    assert (host == -1.0).all()  # nothing outside the partition was written


def test_transposed_input_reads_through_its_strides(k: ModuleType) -> None:
    src = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    z, _ = k.matrix_copy(tile.empty(f32, [32, 64]).partition([16, 16]), tile.from_numpy(src).T).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), src.T)


@pytest.mark.parametrize(("dtype", "kernel"), [(f16, "gemm"), (bf16, "gemm_bf16")])
def test_gemm(k: ModuleType, dtype: Any, kernel: str) -> None:
    a, b = tile.randn(dtype, [96, 64]), tile.randn(dtype, [64, 80])
    expected = a.to_numpy().astype(np.float64) @ b.to_numpy().astype(np.float64)
    c, _, _, _ = getattr(k, kernel)(tile.empty(f32, [96, 80]).partition([32, 16]), a, b, BK=16).sync()
    np.testing.assert_allclose(c.unpartition().to_numpy(), expected, rtol=1e-4, atol=1e-4)


def test_sync_on_a_worker_stream(k: ModuleType) -> None:
    stream = HostStream(worker=True)
    try:
        z, _, _ = k.add(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N])).sync_on(stream)
    finally:
        stream.close()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 2, np.float32))


def test_await(k: ModuleType) -> None:
    async def pipeline() -> np.ndarray[Any, Any]:
        z, x, y = await k.add(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N]))
        z, _, _ = await k.add(z, x, y)  # z is both an output and, through its own tiles, nothing else
        out: np.ndarray[Any, Any] = z.unpartition().to_numpy()
        return out

    np.testing.assert_array_equal(asyncio.run(pipeline()), np.full(N, 2, np.float32))


def test_then_chains_launches(k: ModuleType) -> None:
    first = k.add(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N]))
    op = first.then(lambda out: k.accumulate(out[0], out[1]))
    z, _ = op.sync_on(HostStream())
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 3, np.float32))


def test_graph_capture_and_replay(k: ModuleType) -> None:
    graph = k.accumulate(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])).graph()
    for _ in range(5):
        graph.launch().sync_on(graph.context)
    graph.close()
    z, _ = graph.output
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 5, np.float32))


def test_compile_warms_up_without_moving(k: ModuleType) -> None:
    z, x, y = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N])
    compiled = k.add.compile(z, x, y)
    assert compiled.target.arch == "cpu"
    assert compiled.bytecode
    assert not (z.moved)
    assert not (x.moved)
    assert not (y.moved)
    op = k.add(z, x, y)
    assert op.compile() is compiled
    assert op.launch_grid == (8, 1, 1)
    op.sync()


def test_explicit_grid_for_a_kernel_without_outputs(k: ModuleType) -> None:
    (x,) = k.no_output.grid((8,))(tile.ones(f32, [N])).sync()
    assert not x.moved
    with pytest.raises(KernelAssertionError, match="negative"):
        k.no_output.grid(8)(tile.full(f32, [N], -1.0)).sync()


def test_launch_grid_builder_checks_the_outputs(k: ModuleType) -> None:
    op = k.add(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N]))
    with pytest.raises(
        tile.GridError,
        match=r"\.grid\(\[3, 1, 1\]\) at .*test_frontend_launch\.py:\d+ comes after the launch was checked",
    ):
        op.grid((3,))
    assert op.grid((8, 1, 1)).launch_grid == (8, 1, 1)
    op.sync()


def test_print_from_each_tile(k: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    (z,) = k.hello(tile.zeros(i32, [4 * 16]).partition([16])).sync()
    printed = capsys.readouterr().out
    assert [line.split()[-1] for line in printed.splitlines() if "hello from tile" in line] == ["0", "1", "2", "3"]
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.repeat(np.arange(4), 16))


def test_foreign_output_is_written_in_place(k: ModuleType) -> None:
    host = np.zeros(N, np.float32)
    z = tile.from_dlpack(host).partition([128])
    k.add(z, tile.ones(f32, [N]), tile.full(f32, [N], 2.0)).sync()
    np.testing.assert_array_equal(host, np.full(N, 3, np.float32))


def test_kernel_object_keeps_the_function(k: ModuleType) -> None:
    assert k.add.__name__ == "add"
    assert "add" in repr(k.add)
    assert "unchecked" in repr(k.add_unchecked)
    assert [p.kind for p in k.gemm.params] == ["mut", "tensor", "tensor", "const"]


@pytest.mark.parametrize("dtype", [f32, f16, i32])
def test_dtype_generic_is_bound_from_the_arguments(k: ModuleType, dtype: Any) -> None:
    x = tile.arange(dtype, 300)
    z, _ = k.copy_any(tile.zeros(dtype, [300]).partition([128]), x).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(300).astype(tile.numpy_dtype(dtype)))


def test_unchecked_kernel_reads_through_a_raw_pointer(k: ModuleType) -> None:
    src = tile.arange(f32, 512)
    z, _ = k.read_pointer(tile.empty(f32, [512]).partition([128]), src.data_ptr()).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(512, dtype=np.float32))


def test_unchecked_kernel_writes_through_atomics(k: ModuleType) -> None:
    values = np.random.default_rng(5).integers(0, 16, 1024).astype(np.int32)
    hist, _ = k.histogram.grid(8)(tile.zeros(i32, [16]), tile.from_numpy(values)).sync()
    np.testing.assert_array_equal(hist.to_numpy(), np.bincount(values, minlength=16))


def test_gpu_argument_packing_follows_the_entry_abi(k: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    from tile.compiler import Target
    from tile.frontend import _plan

    x = tile.arange(f32, 64).reshape(8, 8)[1:, 2:]  # a strided view with an offset
    z = tile.zeros(f32, [7, 6]).partition([4, 4])
    compiled = dataclasses.replace(k.matrix_copy.compile(z, x), target=Target("sm_90"))  # the same entry ABI
    prepared: list[tuple[Any, ...]] = []

    def prepare(*launch: Any) -> Any:
        prepared.append(launch)
        return lambda: None

    monkeypatch.setattr(_plan, "prepared_launch", prepare)
    plan = _plan.Plan(compiled, k.matrix_copy.params, [z, x], given=2, grid=(2, 2, 1), device=None)
    stream = object()
    for _ in range(2):  # the second launch reuses the first one's prepared launch
        plan.enqueue((z, x), (2, 2, 1), stream)
    assert len(prepared) == 1
    _, grid, args, kinds, used = prepared[0]
    assert (grid, used) == ((2, 2, 1), stream)
    roles = [(s.param, s.role, s.axis) for s in compiled.abi.slots]
    assert roles[0] == ("z", "base", -1)
    by_role = dict(zip(roles, args, strict=True))
    assert by_role["x", "base", -1] == x.data_ptr()
    assert [by_role["x", "shape", a] for a in (0, 1)] == [7, 6]
    assert [by_role["x", "stride", a] for a in (0, 1)] == [8, 1]
    assert [by_role["z", "shape", a] for a in (0, 1)] == [7, 6]
    assert kinds[0] == "ptr"
    assert set(kinds[1:]) <= {"ptr", "i32"}
    assert len(args) == len(kinds) == len(compiled.abi.slots)


def test_layout_changes_respecialize(k: ModuleType) -> None:
    src = np.arange(64, dtype=np.float32).reshape(8, 8)
    for view in (tile.from_numpy(src), tile.from_numpy(src).T, tile.from_numpy(src)[::2]):
        expected = view.to_numpy()
        z, _ = k.matrix_copy(tile.empty(f32, list(view.shape)).partition([4, 4]), view).sync()
        np.testing.assert_array_equal(z.unpartition().to_numpy(), expected)


def test_a_shared_tensor_feeds_concurrent_launches(k: ModuleType) -> None:
    w = tile.full(f32, [N], 3.0).share()

    async def both() -> list[np.ndarray[Any, Any]]:
        ops = [k.add(tile.zeros(f32, [N]).partition([128]), w, tile.full(f32, [N], float(i))) for i in range(2)]
        assert w.users == 2
        outs = await asyncio.gather(*ops)
        return [z.unpartition().to_numpy() for z, _, _ in outs]

    first, second = asyncio.run(both())
    np.testing.assert_array_equal(first, np.full(N, 3.0, np.float32))
    np.testing.assert_array_equal(second, np.full(N, 4.0, np.float32))
    assert w.users == 0
    assert w.unshare().partition([128]).grid == (8,)


@pytest.mark.parametrize("case", ["add", "axpy", "gemm", "view"])
def test_launch_specialization_matches_the_compile_only_api(k: ModuleType, case: str) -> None:
    """A kernel compiled ahead of time with ``tile compile`` / `specialize` must hit the launcher's cache key."""
    from tile.compiler import specialize

    x = tile.ones(f32, [64, 64])[3:, 1:] if case == "view" else tile.ones(f16 if case == "gemm" else f32, [N])
    args: dict[str, list[Any]] = {
        "add": [tile.zeros(f32, [N]).partition([128]), x, tile.ones(f32, [N])],
        "axpy": [tile.zeros(f32, [N]).partition([128]), 2.0, x, tile.ones(f32, [N])],
        "gemm": [tile.zeros(f32, [64, 64]).partition([32, 32]), tile.ones(f16, [64, 64]), tile.ones(f16, [64, 64]), 16],
        "view": [tile.zeros(f32, [61, 63]).partition([16, 16]), x],
    }
    kernel = {"add": k.add, "axpy": k.axpy, "gemm": k.gemm, "view": k.matrix_copy}[case]
    bound, *_ = kernel._prepare(args[case], {})
    handles = {p.name: v for p, v in zip(kernel.params, args[case], strict=True) if hasattr(v, "shape")}
    tensors = {n: v._tensor if isinstance(v, tile.Partition) else v for n, v in handles.items()}
    expected = specialize(
        kernel.fn,
        {n: t.shape for n, t in tensors.items()},
        strides={n: t.strides for n, t in tensors.items()},
        pointers={n: t.data_ptr() for n, t in tensors.items()},
        consts=bound.consts,
    )
    assert kernel._specialize(bound) == expected


@pytest.mark.parametrize("grid", [(2, 2), (1,), (5,), None])
def test_persistent_kernels_take_any_grid(k: ModuleType, grid: Any) -> None:
    a, b = tile.randn(f16, [96, 64]), tile.randn(f16, [64, 80])
    expected = a.to_numpy().astype(np.float64) @ b.to_numpy().astype(np.float64)
    kernel = k.gemm_persistent if grid is None else k.gemm_persistent.grid(grid)
    launch = kernel(tile.empty(f32, [96, 80]).partition([32, 16]), a, b, BK=16)
    assert launch.compile().abi.walks_tiles(kernel.params[0].name)  # the compiled code, not the text, frees the grid
    c, _, _, _ = launch.sync()
    np.testing.assert_allclose(c.unpartition().to_numpy(), expected, rtol=1e-4, atol=1e-4)


def test_a_walk_compiles_for_its_own_grid_unless_a_grid_is_given(k: ModuleType) -> None:
    # Without .grid(), a tiles() walk is compiled for one block per tile (Specialization.own_grid: no loop); a
    # kernel.grid(g) clone shares the compiled-kernel caches, so it must not pick that code up for its own grid
    # (on one block it would write one tile of fifteen).
    a, b = tile.randn(f16, [96, 64]), tile.randn(f16, [64, 80])
    expected = a.to_numpy().astype(np.float64) @ b.to_numpy().astype(np.float64)
    flags = []
    for kernel in (k.gemm_persistent, k.gemm_persistent.grid((1,)), k.gemm_persistent):
        args = [tile.full(f32, [96, 80], np.nan).partition([32, 16]), a, b]
        bound, *_ = kernel._prepare(args, {"BK": 16})
        flags.append(kernel._specialize(bound).own_grid)
        c, a, b, _ = kernel(*args, BK=16).sync()
        np.testing.assert_allclose(c.unpartition().to_numpy(), expected, rtol=1e-4, atol=1e-4)
    assert flags == [True, False, True]


def test_outputs_agree_on_the_grid_at_different_ranks(k: ModuleType) -> None:
    # Issue 14 (6b): y's partition grid [5, 1] and mean's [5] are one grid (5, 1, 1); grids compare padded.
    xn = np.random.default_rng(7).standard_normal((37, 64)).astype(np.float32)
    y, mean, _ = k.row_mean_two_ranks(
        tile.empty(f32, [37, 1]).partition([8, 1]), tile.empty(f32, [37]).partition([8]), tile.from_numpy(xn)
    ).sync()
    expected = xn.astype(np.float64).mean(axis=1)
    np.testing.assert_allclose(y.unpartition().to_numpy()[:, 0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mean.unpartition().to_numpy(), expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(tile.GridError, match="disagree about the launch grid"):  # a real disagreement still fails
        k.row_mean_two_ranks(
            tile.empty(f32, [37, 2]).partition([8, 1]), tile.empty(f32, [37]).partition([8]), tile.from_numpy(xn)
        )
