"""Specialization, Target and ABI values: validation, derived facts, stable keys, pickling."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tile.compiler import (
    AbiSlot,
    ArraySpec,
    CompileOptions,
    KernelABI,
    ScalarSpec,
    SpecError,
    Specialization,
    Target,
)
from tile.compiler._spec import canonical_dtype, pow2_divisor


@given(st.integers(min_value=1, max_value=1 << 40))
def test_pow2_divisor_is_the_largest_power_of_two_dividing_capped_at_16(value: int) -> None:
    div = pow2_divisor(value)
    assert value % div == 0
    assert div & (div - 1) == 0
    assert div == 16 or (value // div) % 2 == 1


def test_pow2_divisor_of_zero_is_the_cap() -> None:
    assert pow2_divisor(0) == 16
    assert pow2_divisor(0, cap=4) == 4


def test_array_spec_of_derives_the_code_changing_facts() -> None:
    spec = ArraySpec.of("float16", shape=(1024, 96), strides=(96, 1), ptr=0x7F0000000040 + 8, static_dims=[1])
    assert spec.dtype == "f16"
    assert spec.static_shape == (None, 96)
    assert spec.stride_one == (False, True)
    assert spec.shape_div == (16, 16)
    assert spec.stride_div == (16, 1)
    assert spec.base_div == 8
    assert spec.itemsize == 2


def test_array_spec_leaves_extents_out() -> None:
    small = ArraySpec.of("f32", shape=(128, 64), strides=(64, 1))
    large = ArraySpec.of("f32", shape=(4096, 1024), strides=(1024, 1))
    assert small == large
    assert Specialization.make({"x": small}).key() == Specialization.make({"x": large}).key()


def test_max_divisibility_lowers_the_cap() -> None:
    spec = ArraySpec.of("f32", shape=(1024,), strides=(1,), ptr=256, max_divisibility=4)
    assert spec.shape_div == (4,)
    assert spec.base_div == 4


def test_contiguous_default_is_row_major_with_aligned_base() -> None:
    spec = ArraySpec.contiguous("f32", 3)
    assert spec.stride_one == (False, False, True)
    assert spec.static_shape == (None, None, None)
    assert spec.shape_div == (1, 1, 1)
    assert spec.base_div == 16


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dtype": "f33", "ndim": 1}, "unknown dtype 'f33'"),
        ({"dtype": "f32", "ndim": 2, "stride_one": (True,)}, "stride_one has 1 entries for a rank-2"),
        ({"dtype": "f32", "ndim": 1, "shape_div": (3,)}, "must be a power of two from 1 to 16"),
        ({"dtype": "f32", "ndim": 1, "base_div": 32}, "base_div = 32"),
        ({"dtype": "f32", "ndim": 1, "index_dtype": "i16"}, "must be 'i32' or 'i64'"),
    ],
)
def test_array_spec_rejects_malformed_facts(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        ArraySpec(**kwargs)  # type: ignore[arg-type]  # deliberately loose kwargs for the table


def test_spec_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="power of two"):
        ScalarSpec("i32", div=6)


def test_specialization_is_order_independent_and_distinguishes_values() -> None:
    a = Specialization.make(consts={"BM": 128, "BN": 64}, dtypes={"x": "f16"})
    b = Specialization.make(consts={"BN": 64, "BM": 128}, dtypes={"x": "float16"})
    assert a == b
    assert hash(a) == hash(b)
    assert a.key() == b.key()
    assert a.const("BM") == 128
    assert a.dtype("x") == "f16"
    assert a.param("missing") is None
    assert Specialization.make(consts={"BM": 64, "BN": 64}).key() != a.key()


def test_specialization_key_tells_bool_from_int_and_options_apart() -> None:
    assert Specialization.make(consts={"C": True}).key() != Specialization.make(consts={"C": 1}).key()
    hinted = Specialization.make(options=CompileOptions(occupancy=2))
    assert hinted.key() != Specialization().key()


def test_specialization_rejects_non_scalar_consts() -> None:
    with pytest.raises(SpecError, match="must be an int, float or bool"):
        Specialization.make(consts={"B": [1, 2]})  # type: ignore[dict-item]  # the wrong type is the point


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"opt_level": 4}, "opt_level = 4"),
        ({"occupancy": 0}, "occupancy = 0"),
        ({"num_cta_in_cga": 3}, "num_cta_in_cga = 3"),
        ({"num_worker_warps": 6}, "num_worker_warps = 6"),
    ],
)
def test_compile_options_are_validated(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        CompileOptions(**kwargs)  # type: ignore[arg-type]  # deliberately loose kwargs for the table


@pytest.mark.parametrize(("given", "arch"), [("sm_90", "sm_90"), ("90", "sm_90"), (" SM_100 ", "sm_100")])
def test_target_normalises_arch(given: str, arch: str) -> None:
    target = Target(given)
    assert target.arch == arch
    assert str(target) == arch
    assert target.sm == int(arch[3:])


def test_target_rejects_unknown_arch_and_names_the_choices() -> None:
    with pytest.raises(SpecError, match=r"unknown target arch 'sm_75'.*sm_80"):
        Target("sm_75")


def test_cpu_target_is_a_stub() -> None:
    cpu = Target.cpu()
    assert cpu.is_cpu
    assert cpu.sm == 0
    assert cpu.key() != Target("sm_90").key()


def test_kernel_abi_round_trips_through_json() -> None:
    abi = KernelABI("vadd", (AbiSlot("x", "base", -1, "ptr<f32>"), AbiSlot("x", "shape", 0, "i32")))
    assert KernelABI.from_json(abi.to_json()) == abi


@pytest.mark.parametrize(
    "value",
    [
        Specialization.make({"x": ArraySpec.contiguous("f16", 2), "n": ScalarSpec("i32", 8)}, {"B": 128}),
        Target("sm_90"),
        KernelABI("k", (AbiSlot("n", "value", -1, "i32"),)),
        SpecError("bad"),
    ],
)
def test_values_pickle(value: object) -> None:
    again = pickle.loads(pickle.dumps(value))
    assert type(again) is type(value)
    assert str(again) == str(value)


def test_canonical_dtype_spellings() -> None:
    assert canonical_dtype("bool") == "i1"
    assert canonical_dtype("uint8") == "u8"
    assert canonical_dtype("ptr<float32>") == "ptr<f32>"
    assert canonical_dtype("f8e4m3fn") == "f8E4M3FN"


def test_target_for_device_reads_the_compute_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    import tile.bindings

    monkeypatch.setattr(tile.bindings, "compute_capability", lambda ordinal: (9, 0) if ordinal == 0 else (7, 5))
    assert Target.for_device() == Target("sm_90")
    with pytest.raises(SpecError, match="sm_80 and newer"):
        Target.for_device(1)


@pytest.mark.gpu
def test_target_for_the_real_device() -> None:
    assert Target.for_device().sm >= 80


def test_specializations_of_consts_that_compare_equal_but_compile_differently_are_different() -> None:
    """``-0.0 == 0.0`` and ``1 == 1.0 == True``: as dataclass fields these made equal specializations, and a launcher
    keyed by them reused the kernel compiled for the other value. A NaN const is one key, not a new one each time."""
    made = [Specialization.make(consts={"c": v}) for v in (0.0, -0.0, 1, 1.0, True)]
    assert len(set(made)) == len(made)
    assert all(a != b for i, a in enumerate(made) for b in made[i + 1 :])
    assert Specialization.make(consts={"c": -0.0}) == Specialization.make(consts={"c": -0.0})
    assert Specialization.make(consts={"c": float("nan")}) == Specialization.make(consts={"c": float("nan")})


def test_kernel_abi_views_round_trip_and_are_required_when_read_back() -> None:
    abi = KernelABI(
        "k",
        (AbiSlot("z", "base", -1, "ptr<f32>"),),
        tiles=(("z", (16, 32)), ("zs[0]", (8,))),
        static_extents=(("x", (None, 64)),),
    )
    data = abi.to_json()
    assert KernelABI.from_json(data) == abi
    assert (abi.tile_of("z"), abi.tile_of("zs[0]"), abi.tile_of("x")) == ((16, 32), (8,), None)
    for field in ("tiles", "static_extents"):  # an entry written before the views: a miss, rebuilt, never trusted
        with pytest.raises(KeyError, match=field):
            KernelABI.from_json({name: value for name, value in data.items() if name != field})
