"""Runnable examples of the value ops (math, comparisons, conversions, shapes, reductions): one script per op.

Each script runs after the page's prelude (numpy as ``np``, ``tile``, ``Mut``, ``Tensor``, ``Const``, ``Ptr`` and
the dtypes ``f16 f32 i32``) on the CPU interpreter, and ends in an assertion against numpy; the test suite runs
every one (tests/test_lang_reference.py). Families of look-alike ops share a template.
"""

from __future__ import annotations

__all__ = ["MATH_SNIPPETS"]

# One-input elementwise ops on a float tile: (call, numpy expectation).
_UNARY_FLOAT = {
    "exp": "np.exp(x)",
    "exp2": "np.exp2(x)",
    "log": "np.log(x)",
    "log2": "np.log2(x)",
    "sqrt": "np.sqrt(x)",
    "rsqrt": "1 / np.sqrt(x)",
    "sin": "np.sin(x)",
    "cos": "np.cos(x)",
    "tan": "np.tan(x)",
    "sinh": "np.sinh(x)",
    "cosh": "np.cosh(x)",
    "tanh": "np.tanh(x)",
    "floor": "np.floor(x)",
    "ceil": "np.ceil(x)",
}

_UNARY_TEMPLATE = """\
@tile.entry
def {name}_kernel(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.{name}(tile.load_tile_like(x, z)))


x = np.linspace(0.25, 2.5, 16, dtype=np.float32)
z, _ = {name}_kernel(tile.zeros(f32, [16]).partition([8]), tile.from_numpy(x)).sync()
np.testing.assert_allclose(z.unpartition().to_numpy(), {expect}, rtol=1e-6)
"""

# Two-input elementwise ops on f32 tiles: (call in the kernel, numpy expectation).
_BINARY = {
    "maximum": ("tile.maximum(tx, ty)", "np.maximum(x, y)"),
    "minimum": ("tile.minimum(tx, ty, flush_to_zero=True)", "np.minimum(x, y)"),
    "add": ('tile.add(tx, ty, rounding="zero")', "x + y"),
    "sub": ("tile.sub(tx, ty, flush_to_zero=True)", "x - y"),
    "mul": ('tile.mul(tx, ty, rounding="positive_inf")', "x * y"),
    "truediv": ('tile.truediv(tx, ty, rounding="approx", flush_to_zero=True)', "x / y"),
    "pow": ("tile.pow(tx, ty)", "x**y"),
    "atan2": ("tile.atan2(tx, ty)", "np.arctan2(x, y)"),
    "where": ("tile.where(tx > ty, tx, 0.0)", "np.where(x > y, x, 0)"),
    "clamp": ("tile.clamp(tx, 1.0, 2.0)", "np.clip(x, 1, 2)"),
}

_BINARY_TEMPLATE = """\
@tile.entry
def {name}_kernel(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    tx, ty = tile.load_tile_like(x, z), tile.load_tile_like(y, z)
    z.store({call})


x = np.linspace(0.5, 3.0, 16, dtype=np.float32)
y = np.linspace(2.0, 1.0, 16, dtype=np.float32)
z, *_ = {name}_kernel(tile.zeros(f32, [16]).partition([8]), tile.from_numpy(x), tile.from_numpy(y)).sync()
np.testing.assert_allclose(z.unpartition().to_numpy(), {expect}, rtol=1e-6)
"""

# Ops from a (4, 8) f32 tile to a tile of the output's shape: (output dtype, output shape, call, expectation).
_ROWS = {
    "sum": ("f32", "(4, 1)", "tile.sum(t, axis=1, keepdims=True)", "x.sum(axis=1, keepdims=True)"),
    "prod": ("f32", "(4, 1)", "tile.prod(t, axis=1, keepdims=True)", "x.prod(axis=1, keepdims=True)"),
    "max": ("f32", "(4,)", "tile.max(t, axis=1)", "x.max(axis=1)"),
    "min": ("f32", "(1,)", "tile.min(t)", "x.min()"),
    "argmax": ("i32", "(4,)", "tile.argmax(t, axis=1)", "x.argmax(axis=1)"),
    "argmin": ("i32", "(8,)", "tile.argmin(t, axis=0)", "x.argmin(axis=0)"),
    "cumsum": ("f32", "(4, 8)", "tile.cumsum(t, axis=1)", "np.cumsum(x, axis=1)"),
    "cumprod": ("f32", "(4, 8)", "tile.cumprod(t, axis=0)", "np.cumprod(x, axis=0)"),
    "reshape": ("f32", "(8, 4)", "tile.reshape(t, (8, 4))", "x.reshape(8, 4)"),
    "permute": ("f32", "(8, 4)", "tile.permute(t, (1, 0))", "x.T"),
    "transpose": ("f32", "(8, 4)", "tile.transpose(t)", "x.T"),
    "expand_dims": ("f32", "(4, 1, 8)", "tile.expand_dims(t, 1)", "x[:, None, :]"),
    "broadcast_to": (
        "f32",
        "(4, 8)",
        "tile.broadcast_to(tile.max(t, axis=0, keepdims=True), (4, 8))",
        "np.broadcast_to(x.max(axis=0), (4, 8))",
    ),
    "extract": ("f32", "(2, 4)", "tile.extract(t, (1, 1), (2, 4))", "x[2:4, 4:8]"),
    "cat": ("f32", "(8, 8)", "tile.cat(t, t * 2.0, 0)", "np.concatenate([x, x * 2], axis=0)"),
    "astype": ("i32", "(4, 8)", "tile.astype(t * 10.0, i32)", "(x * 10).astype(np.int32)"),
    "bitcast": ("i32", "(4, 8)", "tile.bitcast(t, i32)", "x.view(np.int32)"),
    "isnan": ("i32", "(4, 8)", "tile.isnan(tile.log(t - 1.0)).astype(i32)", "(x < 1).astype(np.int32)"),
    "negative": ("f32", "(4, 8)", "tile.negative(t)", "-x"),
    "abs": ("i32", "(4, 8)", "tile.abs(t.astype(i32) - 1)", "np.abs(x.astype(np.int32) - 1)"),
    "fma": ("f32", "(4, 8)", "tile.fma(t, t, 1.0)", "x * x + 1"),
}

_ROWS_TEMPLATE = """\
@tile.entry
def {name}_kernel(z: Mut[Tensor[{dt}, {shape}]], x: Tensor[f32, (4, 8)]):
    t = x.partition((4, 8)).load((0, 0))
    z.store({call})


x = (np.arange(32, dtype=np.float32).reshape(4, 8) % 7 + 1) / 4
z, _ = {name}_kernel(tile.zeros({dt}, {shape}).partition({shape}), tile.from_numpy(x)).sync()
np.testing.assert_allclose(z.unpartition().to_numpy(), {expect}, rtol=1e-6)
"""

# The others: no template fits them.
_OWN = {
    "full": """\
@tile.entry
def fill(z: Mut[Tensor[f32, "B"]], value: f32):
    z.store(tile.full((B,), value, f32))


z, _ = fill(tile.zeros(f32, [16]).partition([8]), 2.5).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(16, 2.5, np.float32))
""",
    "zeros": """\
@tile.entry
def clear(z: Mut[Tensor[i32, "B"]]):
    z.store(tile.zeros((B,), i32))


z = tile.ones(i32, [16]).partition([8])
(z,) = clear(z).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.zeros(16, np.int32))
""",
    "ones": """\
@tile.entry
def count(z: Mut[Tensor[f32, (1,)]]):
    z.store(tile.sum(tile.ones((64,), f32)))


(z,) = count(tile.zeros(f32, [1]).partition([1])).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), [64.0])
""",
    "arange": """\
@tile.entry
def iota(z: Mut[Tensor[i32, "B"]]):
    z.store(tile.block_id()[0] * B + tile.arange(B))


(z,) = iota(tile.zeros(i32, [32]).partition([8])).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(32))
""",
    "reduce": """\
@tile.function
def larger_magnitude(e, acc):
    return tile.where(tile.abs(e) > tile.abs(acc), e, acc)


@tile.entry
def max_magnitude(z: Mut[Tensor[f32, (4,)]], x: Tensor[f32, (4, 8)]):
    t = x.partition((4, 8)).load((0, 0))
    z.store(tile.reduce(t, 1, fn=larger_magnitude, identity=0.0))


x = np.linspace(-3.0, 2.0, 32, dtype=np.float32).reshape(4, 8)
z, _ = max_magnitude(tile.zeros(f32, [4]).partition([4]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), x[np.arange(4), np.abs(x).argmax(axis=1)])
""",
    "scan": """\
@tile.function
def larger(e, acc):
    return tile.maximum(e, acc)


@tile.entry
def running_max(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (16,)]):
    t = x.partition((16,)).load((0,))
    z.store(tile.scan(t, 0, fn=larger, identity=-3.0e38))


x = np.sin(np.arange(16, dtype=np.float32))
z, _ = running_max(tile.zeros(f32, [16]).partition([16]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.maximum.accumulate(x))
""",
}


def _build() -> dict[str, str]:
    out = {name: _UNARY_TEMPLATE.format(name=name, expect=expect) for name, expect in _UNARY_FLOAT.items()}
    for name, (call, expect) in _BINARY.items():
        out[name] = _BINARY_TEMPLATE.format(name=name, call=call, expect=expect)
    for name, (dt, shape, call, expect) in _ROWS.items():
        out[name] = _ROWS_TEMPLATE.format(name=name, dt=dt, shape=shape, call=call, expect=expect)
    return {**out, **_OWN}


MATH_SNIPPETS: dict[str, str] = _build()
