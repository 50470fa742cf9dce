"""Kernels written in cuTile Python (our peer), exported as Tile IR bytecode, decoded by tile.ir's reader and run
by the interpreter: results match numpy, and races and failed asserts point at the cuTile source line.

The kernel source is written to a temporary file because cuTile compiles from source files; exporting needs no
GPU and no tileiras.
"""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from tile.ir import Module, interp, read_bytecode

ct = pytest.importorskip("cuda.tile")
compilation = pytest.importorskip("cuda.tile.compilation")

Arr = npt.NDArray[Any]

SOURCE = """
import cuda.tile as ct

@ct.kernel
def vadd(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(TILE,))
    y = ct.load(b, index=(bid,), shape=(TILE,))
    ct.store(c, index=(bid,), tile=x + y)

@ct.kernel
def gemm(A, B, C, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int]):
    bidx, bidy = ct.bid(0), ct.bid(1)
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
        a = ct.load(A, index=(bidx, k), shape=(tm, tk), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(B, index=(k, bidy), shape=(tk, tn), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(bidx, bidy), tile=acc.astype(C.dtype))

@ct.kernel
def softmax(x, y, TN: ct.Constant[int]):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, TN), padding_mode=ct.PaddingMode.NEG_INF)
    e = ct.exp(t - ct.max(t, axis=1, keepdims=True))
    ct.store(y, index=(row, 0), tile=e / ct.sum(e, axis=1, keepdims=True))

@ct.kernel
def reductions(x, out, TN: ct.Constant[int]):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, TN))
    ct.store(out, index=(row, 0), tile=ct.reshape(ct.sum(t, axis=1), (1, 1)))
    ct.store(out, index=(row, 1), tile=ct.reshape(ct.min(t, axis=1), (1, 1)))
    ct.store(out, index=(row, 2), tile=ct.reshape(ct.argmax(t, axis=1).astype(ct.float32), (1, 1)))
    ct.store(out, index=(row, 3), tile=ct.reshape(ct.max(ct.cumsum(t, axis=1), axis=1), (1, 1)))

@ct.kernel
def control(x, y, n: int, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    acc = ct.zeros((TILE,), dtype=ct.float32)
    i = 0
    while i < n:
        acc = acc + t
        i += 1
    for j in range(3):
        if j == 1:
            acc = acc * 2.0
    if bid % 2 == 0:
        acc = ct.where(acc > 10.0, acc, -acc)
    else:
        acc = acc - 1.0
    ct.store(y, index=(bid,), tile=acc)

@ct.kernel
def racy(x, z, TILE: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.store(z, index=(0,), tile=t)  # RACY_STORE

@ct.kernel
def permute(x, z, perm, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(z, index=(ct.gather(perm, (bid,)),), tile=t)  # PERMUTE_STORE

@ct.kernel
def histogram(x, counts, TILE: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.atomic_add(counts, (t,), ct.full((TILE,), 1, dtype=ct.int32))

@ct.kernel
def checked(x, TILE: ct.Constant[int]):
    t = ct.load(x, index=(ct.bid(0),), shape=(TILE,))
    ct.assert_(t >= 0.0, "inputs must be non-negative")  # ASSERT
    ct.printf("block %d sum %.1f\\n", ct.bid(0), ct.sum(t))
"""


def _line(marker: str) -> int:
    return next(i for i, text in enumerate(SOURCE.splitlines(), 1) if marker in text)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Module]:
    """Export every kernel of SOURCE with cuTile (bytecode 13.3) and decode it with tile.ir's reader."""
    path = tmp_path_factory.mktemp("cutile") / "cutile_kernels.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("cutile_kernels", path)
    assert spec is not None
    assert spec.loader is not None
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)

    def arr(dtype: Any, ndim: int) -> Any:
        return compilation.ArrayConstraint(dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0,
                                           alias_groups=(), may_alias_internally=False)  # fmt: skip

    f32, f16, i32 = ct.float32, ct.float16, ct.int32
    signatures: dict[str, list[Any]] = {
        "vadd": [arr(f32, 1)] * 3 + [128],
        "gemm": [arr(f16, 2), arr(f16, 2), arr(f32, 2), 64, 64, 32],
        "softmax": [arr(f32, 2)] * 2 + [256],
        "reductions": [arr(f32, 2)] * 2 + [64],
        "control": [arr(f32, 1)] * 2 + [compilation.ScalarConstraint(i32), 64],
        "racy": [arr(f32, 1)] * 2 + [16],
        "permute": [arr(f32, 1), arr(f32, 1), arr(i32, 1), 16],
        "histogram": [arr(i32, 1), arr(i32, 1), 16],
        "checked": [arr(f32, 1), 16],
    }
    modules = {}
    for name, params in signatures.items():
        out = io.BytesIO()
        sig = compilation.KernelSignature(params, compilation.CallingConvention.cutile_python_v2())
        compilation.export_kernel(getattr(kernels, name), [sig], out, output_format="tileir_bytecode",
                                  bytecode_version="13.3")  # fmt: skip
        modules[name] = read_bytecode(out.getvalue())
    return modules


def args(*arrays: Arr, scalars: tuple[Any, ...] = ()) -> list[Any]:
    out: list[Any] = []
    for a in arrays:
        out += [a, *a.shape, *(s // a.itemsize for s in a.strides)]
    return out + list(scalars)


def test_cutile_vadd(exported: dict[str, Module]) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    z = np.zeros(1000, np.float32)
    interp.launch(exported["vadd"], 8, args(x, y, z))
    np.testing.assert_array_equal(z, x + y)


def test_cutile_gemm(exported: dict[str, Module]) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 96)).astype(np.float16)
    b = rng.standard_normal((96, 128)).astype(np.float16)
    c = np.zeros((128, 128), np.float32)
    interp.launch(exported["gemm"], (2, 2), args(a, b, c))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-4)


def test_cutile_softmax(exported: dict[str, Module]) -> None:
    x = np.random.default_rng(2).standard_normal((16, 200)).astype(np.float32)
    y = np.zeros_like(x)
    interp.launch(exported["softmax"], 16, args(x, y))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_cutile_reductions_sum_min_argmax_cumsum(exported: dict[str, Module]) -> None:
    x = np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)
    out = np.zeros((8, 4), np.float32)
    interp.launch(exported["reductions"], 8, args(x, out))
    np.testing.assert_allclose(out[:, 0], x.sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[:, 1], x.min(axis=1))
    np.testing.assert_array_equal(out[:, 2], x.argmax(axis=1))
    np.testing.assert_allclose(out[:, 3], np.cumsum(x, axis=1).max(axis=1), rtol=1e-5, atol=1e-5)


def test_cutile_control_flow(exported: dict[str, Module]) -> None:
    x = np.linspace(-4, 4, 256, dtype=np.float32)
    y = np.zeros_like(x)
    interp.launch(exported["control"], 4, args(x, y, scalars=(3,)))
    acc = (x * 3 * 2).reshape(4, 64)
    even = np.where(acc > 10, acc, -acc)
    expect = np.where(np.arange(4)[:, None] % 2 == 0, even, acc - 1).reshape(-1)
    np.testing.assert_allclose(y, expect, rtol=1e-6)


def test_cutile_racy_store_is_reported_at_its_source_line(exported: dict[str, Module]) -> None:
    x, z = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    with pytest.raises(interp.DataRaceError) as info:
        interp.launch(exported["racy"], 4, args(x, z))
    err = info.value
    assert err.blocks == ((0, 0, 0), (1, 0, 0))
    assert err.element == "arg3[0]"
    assert Path(err.first[1].split(":")[0]).name == "cutile_kernels.py"
    assert err.first[1].split(":")[1] == str(_line("RACY_STORE"))


@pytest.mark.parametrize(("perm", "race"), [([3, 1, 0, 2], False), ([3, 1, 3, 2], True)])
def test_cutile_permute_race(exported: dict[str, Module], perm: list[int], race: bool) -> None:
    x, z = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    p = np.asarray(perm, np.int32)
    if not race:
        interp.launch(exported["permute"], 4, args(x, z, p))
        np.testing.assert_array_equal(z.reshape(4, 16)[p], x.reshape(4, 16))
        return
    with pytest.raises(interp.DataRaceError) as info:
        interp.launch(exported["permute"], 4, args(x, z, p))
    assert info.value.blocks == ((0, 0, 0), (2, 0, 0))
    assert info.value.first[1].split(":")[1] == str(_line("PERMUTE_STORE"))


def test_cutile_histogram_with_atomics_is_race_free(exported: dict[str, Module]) -> None:
    x = np.random.default_rng(4).integers(0, 10, 64).astype(np.int32)
    counts = np.zeros(10, np.int32)
    interp.launch(exported["histogram"], 4, args(x, counts))
    np.testing.assert_array_equal(counts, np.bincount(x, minlength=10))


def test_cutile_assert_and_printf(exported: dict[str, Module]) -> None:
    out = io.StringIO()
    x = np.arange(32, dtype=np.float32)
    interp.launch(exported["checked"], 2, args(x), stdout=out)
    assert out.getvalue() == "block 0 sum 120.0\nblock 1 sum 376.0\n"
    x[20] = -1
    with pytest.raises(interp.KernelAssertionError, match="inputs must be non-negative") as info:
        interp.launch(exported["checked"], 2, args(x), stdout=io.StringIO())
    assert info.value.block == (1, 0, 0)
    assert info.value.location.split(":")[1] == str(_line("ASSERT"))


def test_cutile_token_chains_of_in_place_kernels_pass_the_token_check(tmp_path: Path) -> None:
    """cuTile threads tokens through a load/store/load/store sequence and a loop: no false TokenOrderError."""
    source = """
import cuda.tile as ct

@ct.kernel
def scale_in_place(x, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(x, index=(bid,), tile=t * 2.0)
    u = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(x, index=(bid,), tile=u + 1.0)

@ct.kernel
def accumulate(x, y, n: int, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    for i in range(n):
        t = ct.load(y, index=(bid,), shape=(TILE,))
        ct.store(y, index=(bid,), tile=t + ct.load(x, index=(bid,), shape=(TILE,)))
"""
    path = tmp_path / "in_place_kernels.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("in_place_kernels", path)
    assert spec is not None
    assert spec.loader is not None
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    arr = compilation.ArrayConstraint(
        ct.float32, 1, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(), may_alias_internally=False
    )
    cc = compilation.CallingConvention.cutile_python_v2()
    modules = {}
    for name, params in {
        "scale_in_place": [arr, 16],
        "accumulate": [arr, arr, compilation.ScalarConstraint(ct.int32), 16],
    }.items():
        out = io.BytesIO()
        sig = compilation.KernelSignature(params, cc)
        compilation.export_kernel(
            getattr(kernels, name), [sig], out, output_format="tileir_bytecode", bytecode_version="13.3"
        )
        modules[name] = read_bytecode(out.getvalue())
    x = np.arange(32, dtype=np.float32)
    interp.launch(modules["scale_in_place"], 2, args(x))
    np.testing.assert_array_equal(x, np.arange(32) * 2.0 + 1)
    y = np.zeros(32, np.float32)
    interp.launch(modules["accumulate"], 2, args(x, y, scalars=(3,)))
    np.testing.assert_array_equal(y, 3 * x)
