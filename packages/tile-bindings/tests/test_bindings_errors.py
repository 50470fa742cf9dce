"""check(), error_for() and the error types: mapping, hints, pickling. No driver needed."""

from __future__ import annotations

import pickle

import pytest
from cuda.bindings import driver as cu
from hypothesis import given
from hypothesis import strategies as st

import tile.bindings as tb

_ALL_RESULTS = [r for r in cu.CUresult if r != cu.CUresult.CUDA_SUCCESS]


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (cu.CUresult.CUDA_SUCCESS, None),
        ((cu.CUresult.CUDA_SUCCESS,), None),
        ((cu.CUresult.CUDA_SUCCESS, 7), 7),
        ((cu.CUresult.CUDA_SUCCESS, 7, "x"), (7, "x")),
    ],
)
def test_check_returns_outputs_on_success(result: object, expected: object) -> None:
    assert tb.check(result, "cuSomething") == expected


@given(st.sampled_from(_ALL_RESULTS), st.sampled_from(["cuInit", "cuMemAllocAsync", "cuLaunchKernel"]))
def test_every_failure_becomes_a_cuda_error_naming_the_call(result: cu.CUresult, call: str) -> None:
    with pytest.raises(tb.CudaError) as info:
        tb.check((result, None), call)
    error = info.value
    assert (error.code, error.name, error.call) == (int(result), result.name, call)
    assert call in str(error)
    assert result.name in str(error)
    assert isinstance(error, RuntimeError)
    assert isinstance(error, tb.TileError)


def test_bare_failure_result_raises() -> None:
    with pytest.raises(tb.CudaError, match="cuCtxSynchronize failed with CUDA_ERROR_ILLEGAL_ADDRESS"):
        tb.check(cu.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, "cuCtxSynchronize")


def test_known_results_carry_a_hint_and_others_do_not() -> None:
    oom = tb.error_for(int(cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY), "cuMemAlloc")
    assert oom.hint is not None
    assert oom.hint in str(oom)
    assert tb.error_for(int(cu.CUresult.CUDA_ERROR_ALREADY_MAPPED), "cuMemMap").hint is None


def test_unknown_code_still_maps() -> None:
    error = tb.error_for(987654, "cuFuture")
    assert error.name == "CUresult(987654)"
    assert error.code == 987654


@pytest.mark.parametrize(
    "error",
    [
        tb.CudaError(2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory", "cuMemAllocAsync"),
        tb.DriverNotFoundError("libcuda.so.1 missing"),
        tb.InvalidDeviceError("device 3 does not exist"),
    ],
)
def test_errors_pickle_with_their_fields(error: tb.TileError) -> None:
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is type(error)
    assert str(clone) == str(error)
    assert vars(clone) == vars(error)


def test_driver_not_found_says_what_to_do() -> None:
    text = str(tb.DriverNotFoundError("no libcuda"))
    assert "no libcuda" in text
    assert "python -m tile.bindings" in text


def test_an_illegal_address_points_at_the_interpreter_for_tile_guards() -> None:
    error = tb.error_for(int(cu.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS), "cuStreamSynchronize")
    assert "tile-index guard" in str(error)
    assert "TILE_INTERPRET=1" in str(error)
