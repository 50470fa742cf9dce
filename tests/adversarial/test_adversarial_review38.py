"""Review 38: an adversarial look, from safe kernels only (no ``unchecked=True``), at the kernel language and its
compiler, and at the compile cache's key against the code it names. Each hole's test names it and failed before its
fix.

Hole found and fixed (review 34 left it open): a compile read the kernel's compile-time globals more than once, at
different times. `tile.frontend` recorded the reads (``captures_of``) for its per-call test, the compile key read
them again (``frontend_key``), and the compile's stages read them a third time (``resolve`` re-resolved a kernel or
helper whose global had changed since; a module attribute was read again by the type check). A global rebound by
another thread inside that window gave:

- a compiled kernel whose cache key names the old value and whose code is of the new one, stored so in the memory
  and disk caches: every later compile of the old value, in this process or another sharing the disk cache, got the
  new value's code;
- a kernel object whose record says the old value and whose compiled code is of the new one: once the global was
  rebound back to the old object, the per-call test held by identity and every launch ran the other value's code.

Fixed at the class level: a compile works from one snapshot of the reads. `tile.compiler._captures.captures` takes
it (every read of one holder's name agreeing, else taken again), keeps the resolutions it made, and `compile_kernel`
(``captures=``, the frontend passes its own record) computes the key from that snapshot and runs its stages with
those resolutions pinned (``resolve`` returns them; a resolution's bound names and module attributes are the very
objects its reads recorded). The snapshot's key also holds the text and parameters of every function it resolved:
the source fingerprint reads the globals once more, so a helper rebound between the snapshot and the fingerprint
(two helpers of one name in two files) keyed one helper's code with the other's file. The frontend keeps code and
plans only with the record they were compiled from (`Kernel._record`; a plan made after another thread forgot the
record is not kept). Not memory safety by itself (a stale kernel is self-consistent: its launch checks come from its
own ABI), but the compile cache's promise that a key names its code.

Hole found and fixed (memory safety): with ``from __future__ import annotations`` a kernel's annotations are
strings, which tile.frontend evaluated at decoration (the parameters it partitions and checks by) and the compiler
evaluated again at each compile. A global in an annotation (``Mut[Tensor[f32, (BM,)]]``) rebound after the
decoration gave the compiler another tile shape than the launcher's: 32-element own tiles stored over a grid of
16-element tiles, so a block wrote other blocks' tiles and stores left the view's index space (the interpreter's own
net stopped it; a GPU has none). A function's annotations are now evaluated once for every reader
(`tile.compiler._resolve.annotations_of`), and the parameters they give are in the compile key.

Hole found and fixed (a kernel indexing another tile than its Python text names): ``i = 0; for i in range(n, n +
2): pass; px.load((i,))`` loaded tile 0 where Python reads ``n + 1`` (out of range), and an inner loop reusing the
outer loop's name left the outer index where Python leaves the inner one's last value: a kernel loop's variable is
not visible after the loop, so the name kept its value from before. A loop (not unrolled) whose variable names a
live variable is now a compile error at the loop.

Tried and held (probed on the CPU interpreter, not kept as tests): a loop variable reassigned in the body (``i = i +
n``, ``i += n``) or in a nested ``if``/``while``, a ``while`` counter, a tuple carried through a loop, a
``tile.reduce`` result with a custom combiner, a u32 ``tile.max`` of a loaded tile, ``(x.shape[0] + 15) // 16 + n``
as a bound, ``range(zs.num_tiles[0] + n)`` over sub-tiles: each index is guarded in the kernel (KernelAssertionError
naming the line); ``tile.maximum(n, 0)``/``tile.minimum(n + 5, zs.num_tiles[0])`` bounds and an i64 ``tile.maximum(a,
0)`` start (proven, in range); a ``z.tiles()`` index used for another output's ``store(at=)`` or ``subtiles(at=)``
(compile errors); ``Const[int]`` partition and sub-tile shapes of 0, 3, -16, ``2**40`` or past the owned tile,
``Const`` indices -1 and ``2**32 + 1`` (compile errors, a guard, or the launcher's ArgumentError), ``Const`` steps
0, -1, ``2**63`` (compile errors) and ``2**31`` (a 64-bit loop); a run-time negative ``range`` step (the kernel's
assertion). Left alone (not memory safety): an int constant that the other operand's dtype cannot hold is wrapped
to it without a word (``i * 4294967296`` on an i32 ``i`` is ``0``; the index stays guarded), as the weak-constant rule
says ("the tile's dtype"), but Python would not wrap it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers_adversarial import load_source  # type: ignore[import-untyped, unused-ignore]  # a sibling module

import tile.compiler as tc
import tile.frontend as tile
from tile.compiler import CompileError, _api, _fingerprint, _resolve
from tile.compiler._captures import captures
from tile.compiler._parse import parse
from tile.frontend import _entry, f32

SOURCE = """
import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32, i32

SCALE = 2.0


@tile.function
def scaled(t):
    return t * SCALE


@tile.entry
def by_scale(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)]):
    t = tile.load_tile_like(x, z)
    z.store(t * SCALE)


@tile.entry
def after_the_loop(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], n: i32):
    px = x.partition((16,))
    i = 0
    for i in range(n, n + 2):  # REUSED-BEFORE
        pass
    z.store(px.load((i,)))


@tile.entry
def nested_same_name(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], n: i32):
    px = x.partition((16,))
    acc = tile.zeros((16,), f32)
    for i in range(px.num_tiles[0]):
        for i in range(n):  # REUSED-NESTED
            acc = acc + 1.0
        acc = acc + px.load((i,))
    z.store(acc)


helper = scaled


@tile.entry
def by_helper(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)]):
    z.store(helper(tile.load_tile_like(x, z)))


@tile.entry
def by_scale_twice(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)]):
    t = tile.load_tile_like(x, z)
    z.store(t * SCALE + scaled(t))
"""


@pytest.fixture
def mod(tmp_path: Path) -> Any:
    tile.set_backend("cpu")
    tc.clear_memory_cache()
    module: Any = load_source("review38_globals", SOURCE, tmp_path)
    return module


def _rebind_once(mod: Any, value: float, inner: Callable[..., Any]) -> Callable[..., Any]:
    """``inner`` behind a first call that rebinds ``mod.SCALE`` to ``value`` first (another thread's assignment)."""
    done: list[bool] = []

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not done:
            done.append(True)
            mod.SCALE = value
        return inner(*args, **kwargs)

    return wrapper


def _run(kernel: Any) -> np.ndarray[Any, Any]:
    x = np.arange(16, dtype=np.float32) + 1.0
    out = tile.zeros(f32, [16]).partition([16])
    host: np.ndarray[Any, Any] = kernel(out, tile.from_numpy(x)).sync()[0].unpartition().to_numpy()
    ratio: np.ndarray[Any, Any] = host / x
    return ratio


def test_a_compile_keys_the_values_its_code_was_compiled_with(mod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``SCALE`` rebound between the key's read and the compile's: the kernel compiled for ``SCALE = 2.0``'s key had
    the code of 3.0, and the memory cache handed it to every later compile of 2.0."""
    fn = mod.by_scale.fn
    spec = tc.specialize(fn, {"z": (16,), "x": (16,)})
    target = tc.Target.cpu()
    two = mod.SCALE
    reference = tc.compile_kernel(fn, spec, target, cache=False).bytecode  # the code of 2.0
    monkeypatch.setattr(_api, "run_frontend", _rebind_once(mod, 3.0, _api.run_frontend))  # type: ignore[attr-defined]  # its import
    raced = tc.compile_kernel(fn, spec, target)
    mod.SCALE = two
    assert raced.bytecode == reference, "the kernel keyed for SCALE = 2.0 holds another value's code"
    assert tc.compile_kernel(fn, spec, target).bytecode == reference


def test_a_kernels_record_is_of_the_values_its_code_was_compiled_with(
    mod: Any, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """``SCALE`` rebound to 3.0 for the length of the compile only (another thread's assignment, undone): the kernel
    object's record said 2.0, its cached code was of 3.0, and the call's second check found 2.0 again by identity:
    every launch multiplied by 3 while ``SCALE`` was 2.0."""
    two = mod.SCALE
    real = _entry.compile_kernel  # type: ignore[attr-defined]  # its import

    def compile_kernel(*args: Any, **kwargs: Any) -> Any:
        mod.SCALE = 3.0
        try:
            return real(*args, **kwargs)
        finally:
            mod.SCALE = two

    monkeypatch.setattr(_entry, "compile_kernel", compile_kernel)
    np.testing.assert_array_equal(_run(mod.by_scale), 2.0)
    np.testing.assert_array_equal(_run(mod.by_scale), 2.0)  # the plan's path
    monkeypatch.setattr(_entry, "compile_kernel", real)
    mod.SCALE = 3.0
    np.testing.assert_array_equal(_run(mod.by_scale), 3.0)  # a new value: recompiled


def test_a_snapshot_reads_one_value_for_a_name_read_twice(mod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``SCALE`` read by the kernel and by its helper, rebound between the two resolutions: a snapshot holding 2.0
    for one and 3.0 for the other (kept as one read) would compile ``2t + 3t`` under a key that says 3.0. The
    snapshot is taken again until its reads agree."""
    fn = mod.by_scale_twice.fn
    calls: list[object] = []
    real = _resolve.resolve

    def resolve(tree: Any) -> Any:
        out = real(tree)
        calls.append(tree)
        if len(calls) == 1:
            mod.SCALE = 3.0
        return out

    monkeypatch.setattr(_resolve, "resolve", resolve)
    snapshot = captures(fn)
    monkeypatch.setattr(_resolve, "resolve", real)
    found = {id(r.reads) for r in snapshot.resolutions()}
    assert found
    values = {v for r in snapshot.resolutions() for _, n, v in r.reads if n == "SCALE"}
    assert values == {3.0}
    spec = tc.specialize(fn, {"z": (16,), "x": (16,)})
    compiled = tc.compile_kernel(fn, spec, tc.Target.cpu(), captures=snapshot)
    assert compiled.bytecode == tc.compile_kernel(fn, spec, tc.Target.cpu(), cache=False).bytecode


@pytest.mark.parametrize(("name", "mark"), [("after_the_loop", "REUSED-BEFORE"), ("nested_same_name", "REUSED-NESTED")])
def test_a_loop_variable_may_not_reuse_a_live_name(mod: Any, name: str, mark: str) -> None:
    """``i = 0; for i in range(n, n + 2): pass; px.load((i,))``: Python leaves ``n + 1`` in ``i`` (out of range), the
    kernel loaded tile 0 (a kernel loop's variable is not visible after it, so ``i`` kept its value from before); the
    same for an inner loop reusing the outer loop's name (the outer index read after it, Python's ``n - 1``). The
    kernel silently indexed another tile than the program names. A loop variable that names a live variable is a
    compile error at the loop now."""
    with pytest.raises(CompileError, match="the loop variable 'i' is already a variable here") as info:
        getattr(mod, name)(tile.zeros(f32, [16]).partition([16]), tile.from_numpy(np.zeros(64, np.float32)), 100)
    line = next(n for n, text in enumerate(SOURCE.splitlines(), 1) if mark in text)
    assert f"review38_globals.py:{line}:" in str(info.value)


HELPER = """
import tile.frontend as tile


@tile.function
def helper(t):
    return t * {factor}
"""


def test_a_compile_key_names_the_helpers_text(mod: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two helpers of one name in two files (``t * 2.0`` and ``t * 3.0``, no globals read), the kernel's global
    ``helper`` rebound from the first to the second between the snapshot and the source fingerprint (which reads the
    globals again): the key was the snapshot's text (``helper=function:helper``) and the second file's hash, the code
    the first helper's. A later compile of the second helper found that key in the memory cache and multiplied by 2.
    A snapshot's key now holds the text of every function it resolved."""
    first: Any = load_source("review38_helper_a", HELPER.format(factor="2.0"), tmp_path)
    second: Any = load_source("review38_helper_b", HELPER.format(factor="3.0"), tmp_path)
    fn = mod.by_helper.fn
    spec = tc.specialize(fn, {"z": (16,), "x": (16,)})
    target = tc.Target.cpu()
    mod.helper = first.helper
    real = _fingerprint.source_fingerprint

    def source_fingerprint(f: Any) -> str:
        mod.helper = second.helper  # another thread's assignment, after the snapshot
        return real(f)

    monkeypatch.setattr(_fingerprint, "source_fingerprint", source_fingerprint)
    tc.compile_kernel(fn, spec, target)  # the first helper's code (the snapshot's)
    monkeypatch.setattr(_fingerprint, "source_fingerprint", real)
    assert mod.helper is second.helper
    expected = tc.compile_kernel(fn, spec, target, cache=False).bytecode
    assert tc.compile_kernel(fn, spec, target).bytecode == expected, "the second helper got the first one's code"


FUTURE = """
from __future__ import annotations

import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32

BM = 16


@tile.entry
def fill(z: Mut[Tensor[f32, (BM,)]]):
    z.store(tile.zeros((1,), f32) + 7.0)
"""


def test_string_annotations_are_read_once(tmp_path: Path, path: str) -> None:
    """``from __future__ import annotations`` and ``z: Mut[Tensor[f32, (BM,)]]`` with a global ``BM``: tile.frontend
    evaluated the annotation strings at decoration (``BM = 16``: the outputs are partitioned by 16), the compiler at
    each compile. With ``BM = 32`` rebound after the decoration, the compiled kernel stored 32-element tiles at each
    block's own index of a grid of 16-element tiles: block 1 wrote blocks 2 and 3's tiles, blocks 2 and 3 stored
    outside the view's index space (the interpreter's own net, ``MemoryAccessError``, stopped it; a GPU has none). A
    function's annotations are evaluated once now (`tile.compiler._resolve.annotations_of`), for every reader, and
    the parameters they give are in the compile key."""
    tile.set_backend("cpu")
    module: Any = load_source("review38_future", FUTURE, tmp_path)
    module.BM = 32
    z = tile.zeros(f32, [64]).partition([16])
    host = module.fill(z).sync()[0].unpartition().to_numpy()
    np.testing.assert_array_equal(host, 7.0)
    assert _resolve.resolve(parse(module.fill.fn)).params[0].shape == (16,)  # what the compiler compiles


def test_a_snapshot_of_globals_that_never_settle_is_a_compile_error(mod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread rebinding ``SCALE`` between every two resolutions: no snapshot agrees, and after a bounded
    number of tries the compile stops with a `CompileError` at the kernel that says why (not a loop forever, and not
    a split snapshot)."""
    real = _resolve.resolve
    values = iter(float(v) for v in range(10**6))

    def resolve(tree: Any) -> Any:
        mod.SCALE = next(values)
        return real(tree)

    monkeypatch.setattr(_resolve, "resolve", resolve)
    with pytest.raises(CompileError, match="kept changing while they were read") as info:
        captures(mod.by_scale_twice.fn)
    assert "review38_globals.py" in str(info.value)
