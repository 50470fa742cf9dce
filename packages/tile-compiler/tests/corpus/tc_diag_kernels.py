# mypy: ignore-errors
# ruff: noqa: RUF100, F821, F841, E731, N803, UP037, SIM105, RUF059
# Kernel sources in the kernel language: const-generic names (B, N) are bound by the compiler, not Python; each
# kernel below is wrong in the line marked "# <-" (the diagnostics tests compile them and check the report).
"""Rejected kernels for the diagnostics tests (one mistake each, marked ``# <-``)."""

from __future__ import annotations

import math

import numpy as np

import tile.compiler.lang as tile
from tile.compiler.lang import Const, Mut, Ptr, Tensor, f16, f32, i32


def undefined_name(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z) + missing_thing)  # <-


def uses_try(z: Mut[Tensor[f32, "B"]]):
    try:  # <-
        z.store(1.0)
    except ValueError:
        pass


def uses_with(z: Mut[Tensor[f32, "B"]]):
    with open("x"):  # <-
        pass


def uses_lambda(z: Mut[Tensor[f32, "B"]]):
    f = lambda v: v  # <-
    z.store(f(1.0))


def nested_def(z: Mut[Tensor[f32, "B"]]):
    def inner():  # <-
        return 1

    z.store(1.0)


def python_assert(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    assert x is not None  # <-
    z.store(1.0)


def unannotated(z: Mut[Tensor[f32, "B"]], x):  # <-
    z.store(1.0)


def bad_annotation(z: Mut[Tensor[f32, "B"]], x: list):  # <-
    z.store(1.0)


def missing_generic(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, ("N",)]):  # <-
    z.store(1.0)


def missing_const(z: Mut[Tensor[f32, "B"]], k: Const[int]):  # <-
    z.store(1.0)


def store_dtype(z: Mut[Tensor[f16, "B"]], x: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z))  # <-


def store_shape(z: Mut[Tensor[f32, "B"]]):
    z.store(tile.zeros((B, 2), f32))  # <-


def store_to_input(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    x.store(tile.load_tile_like(x, z))  # <-


def float_const_int_tile(z: Mut[Tensor[i32, "B"]], x: Tensor[i32, -1]):
    z.store(tile.load_tile_like(x, z) * 0.5)  # <-


def mixed_kinds(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[i32, -1]):
    z.store(tile.load_tile_like(x, z) + tile.load_tile_like(y, z))  # <-


def no_broadcast(z: Mut[Tensor[f32, "B"]]):
    z.store(tile.zeros((B,), f32) + tile.zeros((B // 2,), f32))  # <-


def non_pow2_partition(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.partition((100,)).load((0,)))  # <-


def partition_rank(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, (-1, -1)]):
    p = x.partition((B,))  # <-
    z.store(1.0)


def load_arity(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, (-1, -1)]):
    z.store(x.partition((B, B)).load((0,)))  # <-


def reshape_count(z: Mut[Tensor[f32, "B"]]):
    z.store(tile.zeros((B,), f32).reshape((B, 2)))  # <-


def mma_shapes(z: Mut[Tensor[f32, ("B", "B")]]):
    a = tile.zeros((B, 16), f16)
    z.store(tile.mma(a, a, tile.zeros((B, B), f32)))  # <-


def mma_dtypes(z: Mut[Tensor[i32, ("B", "B")]]):
    a = tile.zeros((B, B), f16)
    z.store(tile.mma(a, a, tile.zeros((B, B), i32)))  # <-


def exp_of_int(z: Mut[Tensor[i32, "B"]], x: Tensor[i32, -1]):
    z.store(tile.exp(tile.load_tile_like(x, z)))  # <-


def bad_keyword(z: Mut[Tensor[f32, "B"]]):
    z.store(tile.sum(tile.zeros((B, 2), f32), dim=1))  # <-


def missing_argument(z: Mut[Tensor[f32, "B"]]):
    z.store(tile.full((B,)))  # <-


def bad_axis(z: Mut[Tensor[f32, "B"]]):
    z.store(tile.sum(tile.zeros((B, 2), f32), axis=2))  # <-


def loop_type_change(z: Mut[Tensor[f32, "B"]], n: int):
    acc = 0
    for _ in range(n):
        acc = tile.zeros((B,), f32)  # <-
    z.store(acc)


def loop_local_used_after(z: Mut[Tensor[f32, "B"]], n: int):
    for _ in range(n):
        t = tile.zeros((B,), f32)
    z.store(t)  # <-


def tile_condition(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    if t > 0.0:  # <-
        t = -t
    z.store(t)


def returns_value(z: Mut[Tensor[f32, "B"]]):
    return tile.zeros((B,), f32)  # <-


def return_in_loop(z: Mut[Tensor[f32, "B"]], n: int):
    for _ in range(n):
        return  # <-


def pointer_in_checked(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    p = x.ptr()  # <-
    z.store(1.0)


def calls_numpy(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(np.exp(tile.load_tile_like(x, z)))  # <-


def calls_print(z: Mut[Tensor[f32, "B"]]):
    print("hello")  # <-
    z.store(1.0)


def indexes_tile(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    v = tile.load_tile_like(x, z)[0]  # <-
    z.store(v)


def assigns_attribute(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    x.shape = (1,)  # <-
    z.store(1.0)


@tile.function
def helper_with_bug(t):
    return tile.exp(t.astype(i32))  # <-


def calls_buggy_helper(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(helper_with_bug(tile.load_tile_like(x, z)))


def static_assert_fails(z: Mut[Tensor[f32, "B"]]):
    tile.static_assert(B > 256, "B must exceed 256")  # <-
    z.store(1.0)


def negative_step(z: Mut[Tensor[f32, "B"]]):
    for _ in range(10, 0, -1):  # <-
        pass
    z.store(1.0)


def iterates_tensor(z: Mut[Tensor[f32, "B"]]):
    for _ in z:  # <- (a tuple would be unrolled; a tensor is no iterable)
        pass
    z.store(1.0)


def chained_compare(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    z.store(tile.where(0.0 < t < 1.0, t, 0.0))  # <-


def bad_unpack(z: Mut[Tensor[f32, "B"]]):
    a, b = tile.block_id()  # <-
    z.store(1.0)


def non_pow2_tile(z: Mut[Tensor[f32, "B"]]):  # <-
    z.store(1.0)


def while_on_tile(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    while t:  # <-
        t = t - 1.0
    z.store(t)


def branch_kinds_differ(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1], n: int):
    p = x
    if n > 0:  # <-
        p = y
    z.store(tile.load_tile_like(p, z))


def ptr_param_checked(z: Mut[Tensor[f32, "B"]], p: Ptr[f32]):  # <-
    z.store(1.0)


def bad_padding(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.partition((B,), padding="ones").load((0,)))  # <-


def division_of_ints(z: Mut[Tensor[i32, "B"]], x: Tensor[i32, -1]):
    z.store(tile.load_tile_like(x, z) / 2)  # <-


def mixed_store_schemes(z: Mut[Tensor[f32, ("B", "B")]]):
    for idx in z.tiles():
        z.store(tile.zeros((B, B), f32), at=idx)
    z.store(tile.zeros((B, B), f32))  # <-


def forged_tile_index(z: Mut[Tensor[f32, ("B", "B")]]):
    z.store(tile.zeros((B, B), f32), at=(0, 1))  # <-


def other_outputs_index(z: Mut[Tensor[f32, ("B", "B")]], w: Mut[Tensor[f32, ("B", "B")]]):
    for idx in w.tiles():
        z.store(tile.zeros((B, B), f32), at=idx)  # <-


def group_on_rank1(z: Mut[Tensor[f32, "B"]]):
    for idx in z.tiles(group=4):  # <-
        z.store(tile.zeros((B,), f32), at=idx)


def group_of_zero(z: Mut[Tensor[f32, ("B", "B")]]):
    for idx in z.tiles(group=0):  # <-
        z.store(tile.zeros((B, B), f32), at=idx)


def tile_index_escapes(z: Mut[Tensor[f32, ("B", "B")]]):
    keep = 0
    for idx in z.tiles():
        keep = idx  # <-
    z.store(tile.zeros((B, B), f32))


def store_through_output_view(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.partition((B,)).store(tile.load_tile_like(x, z), (tile.block_id()[0] + 1,))  # <-


def math_of_a_tile(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(math.sqrt(tile.load_tile_like(x, z)))  # <-


def math_domain_error(z: Mut[Tensor[f32, "B"]]):
    z.store(tile.full((B,), math.sqrt(-1.0), f32))  # <-


def math_without_tile_op(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(math.erf(tile.load_tile_like(x, z)))  # <-


def reads_other_outputs_walked_tile(z: Mut[Tensor[f32, ("B", "B")]], w: Mut[Tensor[f32, ("B", "B")]]):
    for idx in z.tiles():
        z.store(w.partition((B, B)).load(idx), at=idx)  # <-


def cat_of_three(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    z.store(tile.cat((t, t, t), 0))  # <-


def cat_without_axis(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    z.store(tile.cat(t, t))  # <-


def propagate_nan_of_ints(z: Mut[Tensor[i32, "B"]], x: Tensor[i32, -1]):
    z.store(tile.maximum(tile.load_tile_like(x, z), 0, propagate_nan=True))  # <-


def propagate_nan_not_bool(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.maximum(tile.load_tile_like(x, z), 0.0, propagate_nan=1))  # <-


def propagate_nan_of_a_sum(z: Mut[Tensor[i32, (1,)]], x: Tensor[i32, -1]):
    z.store(tile.max(x.partition((8,)).load((0,)), propagate_nan=True))  # <-
