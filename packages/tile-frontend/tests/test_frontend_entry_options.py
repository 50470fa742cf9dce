"""``@tile.entry`` options: per-kernel math defaults, entry hints (ints or ``tile.by_arch`` tables), ordered loads.

Kernels run on the CPU interpreter (which honours flush-to-zero); the GPU tier runs the same forms through the
compiler corpus (``test_compiler_corpus_gpu``) and ``examples/attention.py``.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

import tile.frontend as tile
from tile.compiler import SpecError
from tile.frontend import f32

TINY = np.float32(2.0**-126)  # the smallest normal f32


def _subnormal_input(n: int = 64) -> tuple[tile.Tensor, np.ndarray]:
    x = np.random.default_rng(0).uniform(-1, 1, n).astype(np.float32)
    x[::4] = np.float32(5e-39)
    return tile.from_numpy(x), x


@pytest.mark.parametrize("ftz", [False, True])
def test_flush_to_zero_default_flushes_the_operator_only(k: ModuleType, ftz: bool) -> None:
    kernel = tile.entry(flush_to_zero=ftz)(k.doubled)
    x, host = _subnormal_input()
    z, w, _ = kernel(tile.empty(f32, [64]).partition([16]), tile.empty(f32, [64]).partition([16]), x).sync()
    kept = host.astype(np.float64) * 2
    want = np.where(np.abs(host) < TINY, 0.0, kept) if ftz else kept
    np.testing.assert_array_equal(z.unpartition().to_numpy(), want)
    np.testing.assert_array_equal(w.unpartition().to_numpy(), kept)  # flush_to_zero=False on the call wins


def test_ordered_load_with_hints_runs(k: ModuleType) -> None:
    src = np.random.default_rng(1).standard_normal((40, 24)).astype(np.float32)
    z, _ = k.transposed(tile.empty(f32, [24, 40]).partition([8, 16]), tile.from_numpy(src)).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), src.T)


def test_options_reach_the_compile_options(k: ModuleType) -> None:
    options = k.transposed.options
    assert options.occupancy == tile.by_arch(default=1, sm_90=2)
    assert options.num_cta_in_cga == tile.by_arch(sm_100=2)
    assert (options.approx, options.flush_to_zero) == (True, False)


def test_modes_are_part_of_the_compiled_code(k: ModuleType) -> None:
    x, _ = _subnormal_input()
    args = (tile.empty(f32, [64]).partition([16]), tile.empty(f32, [64]).partition([16]), x)
    plain = tile.entry(k.doubled).compile(*args)
    flushed = tile.entry(flush_to_zero=True)(k.doubled).compile(*args)
    assert plain.bytecode != flushed.bytecode
    assert plain.key != flushed.key


@pytest.mark.parametrize(
    "options",
    [
        {"occupancy": 0},
        {"occupancy": tile.by_arch(sm_90=40)},
        {"num_ctas": 3},
        {"num_ctas": 2, "num_cta_in_cga": 2},
        {"num_worker_warps": tile.by_arch(sm_100=5)},
        {"flush_to_zero": "yes"},
    ],
)
def test_invalid_entry_options_raise_at_decoration(options: dict[str, object]) -> None:
    with pytest.raises(SpecError, match=r"must be|not both") as info:
        tile.entry(**options)  # type: ignore[call-overload]  # the point: values the signature refuses
    name = next(iter(options)).replace("num_ctas", "num_cta")
    assert name in str(info.value), info.value  # names the option it refuses
    with pytest.raises(tile.TileError, match=r"must be|not both"):  # the one root catches it too
        tile.entry(**options)  # type: ignore[call-overload]  # the point: values the signature refuses


def test_by_arch_refuses_unknown_arches() -> None:
    with pytest.raises(SpecError, match="unknown arch 'sm_95'"):
        tile.by_arch(sm_95=2)


def test_an_ordered_view_too_small_for_the_grid_is_refused_before_launch(k: ModuleType) -> None:
    # z's grid is 3 x 3 tiles of (8, 16); the view walks k's dim 1 along its dim 0, and k has only 16 columns (2 tiles
    # of 8): the host guard on the block id must compare against that dim, not k's 40 rows.
    z = tile.empty(f32, [24, 48]).partition([8, 16])
    src = tile.from_numpy(np.zeros((48, 16), np.float32))
    with pytest.raises(tile.GridError, match=r"k of shape \(48, 16\) has only 2 tile\(s\) along dim 1"):
        k.transposed(z, src)
    z.unpartition()  # nothing moved: the handles are still usable


@pytest.mark.parametrize("contract", [True, False])
def test_fp_contract_rounds_a_product_plus_a_value_once(k: ModuleType, contract: bool) -> None:
    # (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24 exactly: one fused rounding keeps 2^-24, rounding the product first loses it.
    a = np.float32(1 + 2.0**-12)
    x = tile.from_numpy(np.full(16, a, np.float32))
    y = tile.from_numpy(np.full(16, -1.0, np.float32))
    kernel = tile.entry(fp_contract=contract)(k.axpy.fn)
    z, *_ = kernel(tile.empty(f32, [16]).partition([16]), a, x, y).sync()
    want = 2.0**-11 + 2.0**-24 if contract else 2.0**-11
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(16, want, np.float32))


def test_a_pdl_kernel_runs_on_the_interpreter_and_its_abi_waits(k: ModuleType) -> None:
    # The grid-dependency ops (the entry wait, tile.launch_dependents) are no-ops on the CPU interpreter.
    x, y = np.arange(256, dtype=np.float32), np.full(256, 3, np.float32)
    args = (tile.zeros(f32, [256]).partition([128]), tile.from_numpy(x), tile.from_numpy(y))
    assert k.add_pdl.compile(*args).abi.waits_prior_grid is True
    assert k.add.compile(*args).abi.waits_prior_grid is False
    z, _, _ = k.add_pdl(*args).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), x + y)


def test_pdl_must_be_a_bool() -> None:
    with pytest.raises(SpecError, match=r"pdl = 'yes' must be True or False"):
        tile.entry(pdl="yes")  # type: ignore[call-overload]


def test_tile_pdl_compiles_every_kernel_with_the_entry_wait(k: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    def args(n: int = 96) -> tuple[tile.Partition, tile.Tensor, tile.Tensor]:
        # Layouts no other test compiles: the knob applies from a kernel's next compile for a new layout.
        return tile.zeros(f32, [n]).partition([32]), tile.ones(f32, [n]), tile.ones(f32, [n])

    monkeypatch.setenv("TILE_PDL", "1")
    assert k.add.compile(*args()).abi.waits_prior_grid is True
    z, _, _ = k.add(*args()).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(96, 2, np.float32))
    monkeypatch.setenv("TILE_PDL", "maybe")
    with pytest.raises(tile.BackendError, match="TILE_PDL='maybe' is not a boolean"):
        k.add.compile(*args(160))
