"""The launcher checks the compiled code's view of each memory argument against what it passes (`_abi_check`).

Review 38 found the compiler and the launcher reading a kernel's annotations apart: code compiled for 32-element
tiles ran over a grid of 16-element tiles. These tests forge that disagreement (and its kin: dtype, rank, static
extents, output or input) in the compiled kernel's ABI, in memory and in a disk-cache entry whose checksum is redone,
and show each launch refused with `InternalError` before anything moved, on both launch paths, including a layout
change after the compiled path has a plan; and that real kernels (partitions, subtiles, ``tiles()`` walks, tuple
parameters) carry the views they launch with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.compiler as tc
import tile.frontend as tile
from tile.compiler import AbiSlot, CompiledKernel, DiskCache, KernelABI, clear_memory_cache, knobs
from tile.frontend import InternalError, TileError, _abi_check, _accel, _entry, f16, f32
from tile.frontend._signature import Param

Forge = Callable[[KernelABI], KernelABI]


def _fresh(kernel: tile.Kernel) -> tile.Kernel:
    """A new kernel object of ``kernel``'s function: no compiled code or plan of its own yet."""
    return tile.entry(kernel.fn)


@pytest.fixture
def forged(monkeypatch: pytest.MonkeyPatch) -> list[Forge]:
    """Every kernel the frontend compiles from now on gets its ABI passed through the forgeries appended here."""
    forgeries: list[Forge] = []
    real = tc.compile_kernel  # what `_entry` imported

    def compile_kernel(*args: Any, **kwargs: Any) -> CompiledKernel:
        compiled = real(*args, **kwargs)
        abi = compiled.abi
        for forge in forgeries:
            abi = forge(abi)
        return dataclasses.replace(compiled, abi=abi)

    monkeypatch.setattr(_entry, "compile_kernel", compile_kernel)
    return forgeries


def _args(n: int = 64, tile_n: int = 16) -> tuple[tile.Partition, tile.Tensor, tile.Tensor]:
    z = tile.zeros(f32, [n]).partition([tile_n])
    return z, tile.ones(f32, [n]), tile.full(f32, [n], 2.0)


def _untouched(z: tile.Partition, x: tile.Tensor, y: tile.Tensor) -> None:
    """Nothing moved (every handle still the caller's) and nothing written."""
    assert [h._fate for h in (z, x, y)] == [None, None, None]
    np.testing.assert_array_equal(z._tensor.numpy(), 0.0)


def _tiles(shape: tuple[int, ...]) -> Forge:
    return lambda abi: dataclasses.replace(abi, tiles=tuple((n, shape) for n, _ in abi.tiles))


def test_a_forged_tile_shape_is_refused_before_anything_moves(k: ModuleType, path: str, forged: list[Forge]) -> None:
    forged.append(_tiles((32,)))  # review 38's case: code of 32-element tiles, partitions of 16
    add = _fresh(k.add)
    z, x, y = _args()
    with pytest.raises(InternalError, match=r"add\(\): the compiled code and the launcher disagree about argument 'z'"):
        add(z, x, y)
    _untouched(z, x, y)
    with pytest.raises(InternalError, match=r"in tiles of \(16,\) is passed, .* in tiles of \(32,\)"):
        add(z, x, y).sync()  # the next call too: no plan was kept for this layout
    _untouched(z, x, y)
    assert issubclass(InternalError, TileError)


def test_a_layout_change_after_a_plan_goes_through_the_check(k: ModuleType, path: str, forged: list[Forge]) -> None:
    add = _fresh(k.add)
    z, x, y = add(*_args()).sync()  # a true plan for tiles of 16: the compiled path's latest plan
    z, x, y = add(z, x, y).sync()
    # From now on every compile is forged; the next layout (tiles of 32) compiles anew and must not get a plan.
    forged.append(_tiles((64,)))
    other = _args(tile_n=32)
    with pytest.raises(InternalError, match=r"in tiles of \(32,\) is passed, .* in tiles of \(64,\)"):
        add(*other)
    _untouched(*other)
    z, x, y = add(z, x, y).sync()  # the true layout still launches (its plan was checked when made)
    np.testing.assert_array_equal(z._tensor.numpy(), 3.0)


@pytest.mark.parametrize(
    ("forge", "message"),
    [
        (lambda abi: dataclasses.replace(abi, tiles=()), "a partition in tiles of \\(16,\\) is passed, .* an input"),
        (
            lambda abi: dataclasses.replace(abi, tiles=(*abi.tiles, ("x", (16,)))),
            "argument 'x': an input \\(no partition\\) is passed, .* an output in tiles of \\(16,\\)",
        ),
        (
            lambda abi: dataclasses.replace(
                abi, slots=tuple(dataclasses.replace(s, dtype="ptr<f16>") if s.role == "base" else s for s in abi.slots)
            ),
            "argument 'z': a tensor of f32 is passed, the code reads ptr<f16>",
        ),
        (
            lambda abi: dataclasses.replace(abi, slots=(*abi.slots, AbiSlot("y", "shape", 1, "i32"))),
            "argument 'y': a rank-1 tensor is passed, the code takes 2 shape slot\\(s\\)",
        ),
        (
            lambda abi: dataclasses.replace(abi, static_extents=(("x", (128,)),)),
            "argument 'x': a tensor of shape \\(64,\\) is passed, the code has extents \\(128,\\) built in",
        ),
        (
            lambda abi: dataclasses.replace(abi, slots=(*abi.slots, AbiSlot("w", "base", -1, "ptr<f32>"))),
            "argument 'w': the code takes it as a tensor, the call passes none",
        ),
    ],
)
def test_each_view_the_code_has_is_checked(
    k: ModuleType, path: str, forged: list[Forge], forge: Forge, message: str
) -> None:
    forged.append(forge)
    z, x, y = _args()
    with pytest.raises(InternalError, match=message):
        _fresh(k.add)(z, x, y)
    _untouched(z, x, y)


def test_a_forged_disk_cache_entry_is_refused_and_one_without_the_views_rebuilt(
    k: ModuleType, path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))
    clear_memory_cache()
    compiled = _fresh(k.add).compile(*_args())
    store = DiskCache(tmp_path)
    entry_key = f"{compiled.key}-cpu"
    entry = store.get("kernel", entry_key)
    assert entry is not None, "the CPU kernel was stored on disk"
    assert entry.meta["abi"]["tiles"] == [["z", [16]]]

    def rewrite(abi: dict[str, Any]) -> None:  # `put` redoes the checksum: the entry reads back as intact
        meta = {name: value for name, value in entry.meta.items() if name != "abi"}
        assert store.put("kernel", entry_key, {**meta, "abi": abi}, entry.blobs)
        clear_memory_cache()

    rewrite({**entry.meta["abi"], "tiles": [["z", [32]]]})
    z, x, y = _args()
    with pytest.raises(InternalError, match="in tiles of \\(32,\\)"):
        _fresh(k.add)(z, x, y)
    _untouched(z, x, y)

    # An entry written before the views existed is not trusted: it reads back as a miss and is rebuilt.
    rewrite({name: value for name, value in entry.meta["abi"].items() if name != "tiles"})
    rebuilt = _fresh(k.add).compile(z, x, y)
    assert rebuilt.origin == "compiled"
    assert rebuilt.abi.tiles == (("z", (16,)),)
    z, x, y = _fresh(k.add)(z, x, y).sync()
    np.testing.assert_array_equal(z._tensor.numpy(), 3.0)
    assert knobs().cache_dir == tmp_path


def test_real_kernels_carry_the_views_they_launch_with(
    k: ModuleType, sk: ModuleType, gk: ModuleType, path: str
) -> None:
    # A partition (own tile), a static extent, a tiles() walk, sub-tiles, and tuple parameters (element by element).
    z, x = k.static_input(tile.zeros(f32, [1024]).partition([128]), tile.ones(f32, [1024])).sync()
    assert k.static_input.compile(z, x).abi.static_extents == (("x", (1024,)),)
    a, b = tile.ones(f16, [64, 32]), tile.ones(f16, [32, 64])
    out, a, b, _ = k.gemm_persistent(tile.zeros(f32, [64, 64]).partition([32, 32]), a, b, BK=16).sync()
    assert k.gemm_persistent.compile(out, a, b, BK=16).abi.tiles == (("z", (32, 32)),)
    np.testing.assert_array_equal(out._tensor.numpy(), 32.0)
    outs = tuple(tile.zeros(f32, [64]).partition([16]) for _ in range(2))
    xs = tuple(tile.ones(f32, [64]) for _ in range(2))
    outs, xs, _ = gk.grouped_scale(outs, xs, 2.0).sync()
    assert gk.grouped_scale.compile(outs, xs, 2.0).abi.tiles == (("outs[0]", (16,)), ("outs[1]", (16,)))
    for o in outs:
        np.testing.assert_array_equal(o._tensor.numpy(), 2.0)
    launch = (tile.zeros(f32, [4, 256]).partition([1, 256]), tile.ones(f32, [4, 256]), tile.ones(f32, [256]), 1e-6)
    assert sk.rmsnorm_chunked.compile(*launch, BN=64).abi.tiles == (("z", (1, 256)),)
    rows, *_ = sk.rmsnorm_chunked(*launch, BN=64).sync()
    np.testing.assert_allclose(rows._tensor.numpy(), 1.0, rtol=1e-5)


def test_the_check_runs_once_per_layout_not_per_launch(
    k: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = _abi_check.check_abi

    def counting(compiled: CompiledKernel, params: tuple[Param, ...], args: tuple[Any, ...]) -> None:
        calls.append(compiled.name)
        real(compiled, params, args)

    monkeypatch.setattr("tile.frontend._plan.check_abi", counting)
    add = _fresh(k.add)
    z, x, y = _args()
    for _ in range(5):
        z, x, y = add(z, x, y).sync()
    assert calls == ["add"]
    add(*_args(tile_n=32)).sync()  # a new layout: its own plan, checked
    assert calls == ["add", "add"]
    assert _accel.active() == path
