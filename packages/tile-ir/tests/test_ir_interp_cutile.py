"""Kernels written in cuTile Python (our peer), exported as Tile IR bytecode, decoded by tile.ir's reader and run
by the interpreter: results match numpy, and races and failed asserts point at the cuTile source line.

The kernel source is written to a temporary file because cuTile compiles from source files; exporting needs no
GPU and no tileiras.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

# Test helpers live beside the tests; --import-mode=importlib does not put this folder on sys.path.
sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_tools import compile_cubin
from tile.ir import Module, interp, read_bytecode

pytestmark = pytest.mark.requires_cutile  # cuda-tile is a test dependency: TILE_REQUIRE_CUTILE=1 fails without it
try:
    ct: Any = importlib.import_module("cuda.tile")
    compilation: Any = importlib.import_module("cuda.tile.compilation")
except ImportError:  # the marker skips (or fails) every test before one reads these
    ct = compilation = None

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
def cutile_bytecode(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Export every kernel of SOURCE with cuTile (bytecode 13.3)."""
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
    exports = {}
    for name, params in signatures.items():
        out = io.BytesIO()
        sig = compilation.KernelSignature(params, compilation.CallingConvention.cutile_python_v2())
        compilation.export_kernel(getattr(kernels, name), [sig], out, output_format="tileir_bytecode",
                                  bytecode_version="13.3")  # fmt: skip
        exports[name] = out.getvalue()
    return exports


@pytest.fixture(scope="module")
def exported(cutile_bytecode: dict[str, bytes]) -> dict[str, Module]:
    """The cuTile exports decoded by tile.ir's reader."""
    return {name: read_bytecode(data) for name, data in cutile_bytecode.items()}


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


# ---- the interpreter against the device ---------------------------------------------------------------------
# Same exports, compiled by tileiras and launched with raw cuda.bindings (block (1, 1, 1), cuTile's ABI: per array
# a u64 pointer, i32 extents, i32 strides in elements; scalars as i32); every output must match the interpreter.


def _device_cases(rng: np.random.Generator) -> dict[str, tuple[tuple[int, ...], list[Any], list[int]]]:
    """kernel -> (grid, arguments in kernel order (arrays or int scalars), indices of the outputs)."""
    f32 = np.float32
    return {
        "vadd": ((8,), [rng.random(1000, dtype=f32), rng.random(1000, dtype=f32), np.zeros(1000, f32)], [2]),
        "gemm": (
            (2, 2),
            [
                rng.standard_normal((128, 96)).astype(np.float16),
                rng.standard_normal((96, 128)).astype(np.float16),
                np.zeros((128, 128), f32),
            ],
            [2],
        ),
        "softmax": ((16,), [rng.standard_normal((16, 200)).astype(f32), np.zeros((16, 200), f32)], [1]),
        "reductions": ((8,), [rng.standard_normal((8, 64)).astype(f32), np.zeros((8, 4), f32)], [1]),
        "control": ((4,), [np.linspace(-4, 4, 256, dtype=f32), np.zeros(256, f32), 3], [1]),
        "histogram": ((4,), [rng.integers(0, 10, 64).astype(np.int32), np.zeros(10, np.int32)], [1]),
    }


def _flatten(values: list[Any], pointers: dict[int, int] | None = None) -> list[Any]:
    """cuTile's ABI for `values`; arrays become `pointers[i]` (device) or themselves (interpreter)."""
    out: list[Any] = []
    for i, v in enumerate(values):
        if isinstance(v, np.ndarray):
            out += [v if pointers is None else pointers[i], *v.shape, *(s // v.itemsize for s in v.strides)]
        else:
            out.append(v)
    return out


def _tileiras_cubin(bytecode: bytes, arch: str) -> bytes:
    proc, cubin = compile_cubin(bytecode, arch)
    assert proc.returncode == 0, proc.stderr
    return cubin


@pytest.mark.requires_tileiras
def test_device_cases_compile_with_tileiras(cutile_bytecode: dict[str, bytes], tmp_path: Path) -> None:
    """The CPU half of the device comparison: every kernel it launches compiles for sm_90."""
    for name, (_, values, _) in _device_cases(np.random.default_rng(0)).items():
        assert _tileiras_cubin(cutile_bytecode[name], "sm_90")[:4] == b"\x7fELF", name
        fake = {i: 0x1000 * (i + 1) for i, v in enumerate(values) if isinstance(v, np.ndarray)}
        packed = _pack(values, fake)
        params = read_bytecode(cutile_bytecode[name]).functions[0].params
        assert len(packed) == len(params), name
        widths = [8 if "ptr" in str(p.type) else 4 for p in params]
        assert [b.nbytes for b in packed] == widths, name


def _pack(values: list[Any], pointers: dict[int, int]) -> list[Arr]:
    """One little buffer per kernel parameter: u64 for pointers, i32 for extents, strides and scalars."""
    device, host = _flatten(values, pointers), _flatten(values)
    return [
        np.array([d], np.uint64) if isinstance(h, np.ndarray) else np.array([d], np.int32)
        for d, h in zip(device, host, strict=True)
    ]


def _ok(result: Any) -> Any:
    from cuda.bindings import driver

    err, *rest = result if isinstance(result, tuple) else (result,)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return rest[0] if len(rest) == 1 else rest


def _run_on_device(cubin: bytes, symbol: str, grid: tuple[int, ...], values: list[Any], outputs: list[int]) -> None:
    """Launch `cubin` on the current context and copy the `outputs` arrays back into `values` in place."""
    from cuda.bindings import driver

    module = _ok(driver.cuModuleLoadData(cubin))
    function = _ok(driver.cuModuleGetFunction(module, symbol.encode()))
    pointers = {}
    for i, v in enumerate(values):
        if isinstance(v, np.ndarray):
            pointers[i] = int(_ok(driver.cuMemAlloc(max(v.nbytes, 1))))
            _ok(driver.cuMemcpyHtoD(pointers[i], np.ascontiguousarray(v).ctypes.data, v.nbytes))
    packed = _pack(values, pointers)
    params = np.array([p.ctypes.data for p in packed], dtype=np.uint64)
    gx, gy, gz = (*grid, 1, 1)[:3]
    _ok(driver.cuLaunchKernel(function, gx, gy, gz, 1, 1, 1, 0, 0, params.ctypes.data, 0))
    _ok(driver.cuCtxSynchronize())
    for i in outputs:
        _ok(driver.cuMemcpyDtoH(values[i].ctypes.data, pointers[i], values[i].nbytes))
    for p in pointers.values():
        _ok(driver.cuMemFree(p))
    _ok(driver.cuModuleUnload(module))


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_interpreter_matches_the_device(cutile_bytecode: dict[str, bytes], tmp_path: Path) -> None:
    from cuda.bindings import driver

    _ok(driver.cuInit(0))
    device = _ok(driver.cuDeviceGet(0))
    context = _ok(driver.cuDevicePrimaryCtxRetain(device))
    _ok(driver.cuCtxSetCurrent(context))
    attr = driver.CUdevice_attribute
    major = _ok(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device))
    minor = _ok(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device))
    try:
        for name, (grid, values, outputs) in _device_cases(np.random.default_rng(7)).items():
            module = read_bytecode(cutile_bytecode[name])
            on_cpu = [v.copy() if isinstance(v, np.ndarray) else v for v in values]
            interp.launch(module, grid, _flatten(on_cpu))
            cubin = _tileiras_cubin(cutile_bytecode[name], f"sm_{major}{minor}")
            _run_on_device(cubin, module.functions[0].name, grid, values, outputs)
            for i in outputs:
                np.testing.assert_allclose(values[i], on_cpu[i], rtol=2e-5, atol=2e-5, err_msg=name)
    finally:
        _ok(driver.cuDevicePrimaryCtxRelease(device))
