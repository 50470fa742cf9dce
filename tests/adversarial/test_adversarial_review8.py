"""Review 8: attacks on the safe API by a third adversarial review (tuple parameters, ``tile.partitioned`` and the
tile.kernels ``out=`` paths, the Qwen3 model's public state). Each hole's test names it in its docstring, failed
before its fix, and asserts the typed error or the right result. They run on the CPU interpreter.

Attempts that turned out already closed (the most important have a test below):

- tuple parameters: the same output partition twice in a ``tuple[Mut[...]]`` (AliasError), output groups of
  different tile counts (GridError) or tile shapes (a const generic conflict), a nested list as an element
  (ArgumentError), a keyword named like a flattened element (``**{"xs[0]": 3}``) or like the tuple parameter itself
  (refused: not a const generic), a runtime index into a tuple (CompileError); the same input tensor twice in a
  tuple is accepted (inputs are shared read-only) and both handed back.
- ``out=``: a numpy array passed as both ``x`` and ``out=`` of `tk.rmsnorm` (BorrowError: the two borrows of one
  foreign memory overlap), a reversed (negative-stride) view as ``out=`` (ArgumentError).
- embedding ids held in a device tensor (not read on the host by ``embedding_op``): an i32 id past the table or
  negative traps in the kernel (KernelFaultError), it never reads other memory (the i64 case was a hole, below).
- KV-cache appends: the same foreign array as ``k_cache`` and ``v_cache``, or new rows viewing the cache, are
  refused (the cache cannot be partitioned while another borrow overlaps it); positions are asserted in the kernel.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
import tile.kernels as tk

sys.path.insert(0, str(Path(__file__).parent))
from helpers_adversarial import load_path  # a sibling helper module

from tile.frontend import f32

GROUP_KERNELS = Path(__file__).resolve().parents[2] / "packages/tile-frontend/tests/kernels/group_kernels.py"


@pytest.fixture(autouse=True)
def _cpu() -> None:
    tile.set_backend("cpu")


# -- tile.kernels.qwen3: what the model's checks read is fixed --------------------------------------------------


@pytest.mark.parametrize(("name", "value"), [("max_seq", 64), ("config", None)])
def test_what_the_models_checks_read_cannot_be_reassigned(name: str, value: object) -> None:
    """Hole: review 7 refused a bad ``Qwen3.length`` by checking it against ``Qwen3.max_seq``, which is public and
    was assignable too: ``model.max_seq = 64`` on a model whose cache holds 8 positions let ``forward`` past the
    check at a full cache; the RoPE kernel indexed its tables past their end (a KernelAssertionError here, a trap
    that ends the CUDA context on the GPU) and the failed chain lost the KV caches it had moved in (every later call
    raised MovedError). ``model.block = 3`` did the same through a CompileError mid-chain (the attribute is gone: a
    multi-token pass now uses the library's flash attention), and ``model.config`` (the vocabulary check reads it)
    is the third such attribute. Now they are read-only (FrozenError, a TileError), and
    the model keeps working."""
    from tile.kernels.qwen3 import TINY, Qwen3, random_weights

    model = Qwen3(TINY, random_weights(TINY, seed=1), max_seq=8)
    model.forward(list(range(1, 9)))  # the cache is full
    with pytest.raises(tile.FrozenError, match=rf"Qwen3\.{name} is read-only: .*make a new Qwen3"):
        setattr(model, name, value)
    with pytest.raises(tile.FrozenError, match=rf"Qwen3\.{name} is read-only"):
        delattr(model, name)
    with pytest.raises(tile.ArgumentError, match="exceed the cache of 8 positions"):
        model.forward([1])  # refused before anything moved
    model.reset()
    logits = model.forward([1, 2])
    assert logits.shape == (TINY.vocab_size,)
    assert np.isfinite(logits).all()
    model.length = 1  # the one state a caller sets stays assignable
    assert model.forward([3]).shape == (TINY.vocab_size,)


# -- already closed -----------------------------------------------------------------------------------------------


def test_an_out_borrowing_the_inputs_memory_is_refused_and_leaves_it_intact() -> None:
    """Closed: ``tk.rmsnorm(x, w, out=x)`` with a numpy ``x`` borrows the one memory twice through DLPack; the
    output cannot be partitioned while the input's borrow is alive (BorrowError), and ``x`` is not written."""
    x = np.random.default_rng(0).random((4, 64), dtype=np.float32)
    before = x.copy()
    with pytest.raises(tile.BorrowError, match=r"needs exclusive memory, but 1 other live handle"):
        tk.rmsnorm(x, np.ones(64, np.float32), out=x)
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize(
    ("bad", "dtype"),
    [(10, np.int32), (-1, np.int32), (2**32 + 1, np.int64), (-(2**32) + 2, np.int64)],
    ids=["past", "negative", "i64-wraps-to-1", "i64-wraps-to-2"],
)
def test_a_device_id_outside_the_table_traps_in_the_kernel(bad: int, dtype: type[np.integer[Any]]) -> None:
    """Hole: ``embedding_op`` does not read a device tensor of ids on the host (its docstring: "an id outside the table
    faults in the kernel"), and the kernel cast each id to i32 before the table's bounds check, so an i64 id of
    ``2**32 + 1`` read row 1 silently (in bounds, but another row than asked, and no fault). Now the kernel checks the
    id in its own dtype first; ids past the table or negative trapped before and still do."""
    table = tile.from_numpy(np.arange(40, dtype=np.float32).reshape(10, 4))
    ids = tile.from_numpy(np.array([3, bad], dtype=dtype))
    with pytest.raises(tile.KernelFaultError, match=r"embedding: an id is outside the table"):
        tk.embedding_op(table, ids).sync()
    good = tk.embedding_op(table, tile.from_numpy(np.array([3, 9], dtype=dtype))).sync()
    assert good[0].unpartition().to_numpy()[:, 0].tolist() == [12.0, 36.0]


def test_one_output_partition_twice_in_a_tuple_is_refused() -> None:
    """Closed: the same partition as two elements of a ``tuple[Mut[...]]`` is an output overlapping an output."""
    gk = load_path("adversarial_group_kernels", GROUP_KERNELS)
    p = tile.zeros(f32, [16]).partition((16,))
    x = tile.ones(f32, [16])
    with pytest.raises(tile.AliasError, match=r"output 'outs\[0\]' and output 'outs\[1\]' overlap in memory"):
        gk.grouped_scale([p, p], [x, x], 2.0)
    assert p.unpartition().to_numpy().tolist() == [0.0] * 16  # the refused call left the partition usable


# -- tile.frontend: view extents are integers --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("view", "bad"),
    [
        (lambda x: x.reshape(2.5, -1), "float 2.5"),
        (lambda x: x.reshape(4.0, 6), "float 4.0"),
        (lambda x: x.reshape(True, 24), "bool True"),
        (lambda x: x.reshape((2, 12.9)), "float 12.9"),
        (lambda x: x.permute(1.5, 0), "float 1.5"),
    ],
    ids=["fraction", "float", "bool", "sequence", "permute"],
)
def test_view_extents_and_axes_are_integers(view: Any, bad: str) -> None:
    """Hole: ``Tensor.reshape`` and ``permute`` ran ``int()`` on their arguments, so ``x.reshape(2.5, -1)`` silently
    made a ``(2, 12)`` view and ``x.permute(1.5, 0)`` a transpose, where tensor creation (``tile.zeros(f32, [2.5])``)
    and the kernels' counts refuse a float. Now an extent or an axis is a Python or numpy int (not a bool) or an
    ArgumentError naming it, and the tensor stays usable."""
    x = tile.from_numpy(np.arange(24, dtype=np.float32).reshape(4, 6))
    with pytest.raises(tile.ArgumentError, match=rf"extents and axes are ints; got {bad} in"):
        view(x)
    assert x.reshape(np.int64(2), -1).shape == (2, 12)  # numpy ints are ints
    assert x.permute(np.int32(1), 0).shape == (6, 4)
