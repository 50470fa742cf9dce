"""Review 40: an adversarial look at programmatic dependent launch (PDL: ``@tile.entry(pdl=True)``, ``TILE_PDL=1``,
``tile.launch_dependents()``, tile.core's ``prepare(pdl=True)``, the library's PDL kernel modules) and at CUDA graphs
and ``tile.distributed`` collectives composed with PDL launches.

The whole safety argument of PDL is one compile-time fact: a kernel whose ABI says ``waits_prior_grid`` (the only
kind tile.frontend launches with ``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION``) has *every* load, store
and atomic token-ordered after its entry ``gdc_wait_tko``. Tile IR orders memory by token chains, not by source order
(cuda-tile: "Source order alone does not establish that chain"), and PTX's ``griddepcontrol.wait`` waits until the
prerequisite grids have completed and their memory operations are performed and visible; ``launch_dependents``
(``gdc_launch_dependents_tko``) "controls scheduling only and does not provide memory ordering guarantees". So the
early start of a dependent, or a primary's early ``launch_dependents`` (even placed before its stores, as the library
decode kernels and the tests' ``add_pdl`` do), cannot let anything read or write before the predecessor completed.

Hole (class level, closed): nothing *checked* that fact. The typechecker builds it (every chain starts at the wait's
token) and a test looked at two corpus kernels, but ``KernelABI.waits_prior_grid`` was set from the option alone: a
future emitter that started a chain at a fresh ``make_token``, emitted an access without a token, or chained after
``print``/``launch_dependents`` (whose tokens come from nothing) would have compiled a kernel that the launcher starts
early, racing its predecessor, with no test failing. ``tile.compiler._pdl_check.check_entry_wait`` now runs in
``lower`` on every kernel whose ABI claims the wait: the wait must be the first op, every access must take a token,
and no other token root (``make_token``, ``print_tko``, ``gdc_launch_dependents_tko``, an untokened access) may feed
anything but the index guard's fault store (a constant stored to the never-mapped constant address 16, its token
unused). A violation is a typed ``PdlOrderError`` at compile time instead of an early launch. Pinned below by
emitter regressions (each compiled early before the check, refused now) and by the whole compiler corpus (111
kernels) compiled with ``pdl=True``.

Tried, and held (read or probed):

- where the wait goes: first op of the entry, before the parameters' ``assume``s and views; every access of the 111
  corpus kernels (helpers ``@tile.function`` inlined into the entry's chains, loop preambles and carried tokens,
  ``while`` loops, tuples of tensors, subtile walks, ``scalar``-indexed loads, unchecked gather/scatter/atomics on the
  raw chain) descends from it. The only other root is the guard's fault store, which reads and writes no argument
  (and, data-dependent guards aside, may fault before the predecessor ends: a sticky error, never a race).
  ``print``/``assert`` read registers only.
- the hint: ``launch_dependents`` is emitted with no token (free to float above the wait): harmless, because a
  dependent's own wait still waits for this grid's completion, which in turn came after this grid's wait; so a chain
  A0 -> A (hint before its wait) -> B still orders B after A0 (completion is transitive).
- the launcher: ``pdl`` reaches tile.core only as ``compiled.abi.waits_prior_grid`` (``_execute.prepared_launch``);
  ``compile_bytecode``/``compile_module`` (foreign or hand-built IR) make ABIs without it; an ABI read from the disk
  cache without the field is False; the spec key (so the in-memory, disk and module caches) includes ``pdl``;
  tile.core refuses ``pdl=True`` without ``unchecked=True``; the compiled relaunch (``_fastlaunch.c``) calls the
  prepared launch's own ``_launch`` (``cuLaunchKernelEx`` for PDL), never a hard-coded ``cuLaunchKernel``; before
  sm_90 the attribute is dropped. A PDL kernel handed out where a plain one was meant (``TILE_PDL``, the library's
  ``launch_pdl`` copies, ``_gemv``/``_rowforms`` re-wraps keeping ``base.options.pdl``) is still safe: it waits.
- hand-back: completions are events recorded after the kernel (or the graph launch); an event completes only after
  the stream work before it, and a PDL kernel completes only after its wait returned, so no early start or early
  hint is ever taken for completion (tile.aio has no PDL-specific bookkeeping to get wrong). ``.then`` chains hand
  back at the chain's end; stream-ordered frees and pool reuse between two launches are covered by the dependent's
  wait too.
- what follows or precedes a PDL kernel: the attribute relaxes only the dependency on the *previous kernel* of the
  stream; a copy, memset, host function (``host_call``), event wait (cross-stream order, tile.core's ``_track``) or
  graph launch in between keeps full order, and a non-PDL kernel after a PDL one is launched plainly. In a captured
  graph the driver turns kernel-to-kernel edges into programmatic ones; the dependent's wait covers every
  programmatic predecessor. NCCL and torch's one-shot all-reduce run on the context's stream in stream order.
- a gloo ``all_reduce`` between two PDL launches, in a ``.then`` chain and captured into a graph replayed twice:
  exact, the collective's tensor moved in (refused while held) and handed back only at ``graph.close()`` (pinned).
  In the frontend, device-side order across streams is never relied on without a host wait (allocations are ready
  on every stream; a handle crosses streams only once its run was observed done), so no PDL kernel depends on an
  event wait of another stream; tile.core's own cross-stream ``cuStreamWaitEvent`` is a non-kernel op, which the
  attribute does not relax.
- the CPU interpreter and tile.core's simulator run PDL in stream order (no overlap to observe); GPU tests below.

GPU tests for the lead (marker ``gpu``): a PDL chain captured as a graph, fed by ``graph_write`` (a copy right
before the first PDL kernel, after the previous replay's early ``launch_dependents``) and replayed alternately on
two streams; a PDL chain whose every step reads a tensor made between the launches; and a slow primary (a row-sum
loop over 64 MB) that calls ``launch_dependents`` before its loop and stores, read by PDL dependents (NaN if early).
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from helpers_adversarial import load_source  # a sibling helper module

import tile.frontend as tile
from tile import ir
from tile.compiler import CompileOptions
from tile.compiler._lower import lower
from tile.compiler._parse import parse
from tile.compiler._pdl_check import MEMORY_OPS, PdlOrderError, check_entry_wait
from tile.compiler._resolve import resolve
from tile.compiler._spec import ArraySpec, Specialization, Target
from tile.compiler._typecheck import Checker, typecheck
from tile.compiler._typecheck_memory import ENTRY_TOKEN
from tile.compiler._types import TokenType
from tile.frontend import f32

CORPUS = Path(__file__).parents[2] / "packages" / "tile-compiler" / "tests" / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))
_MODULES = sorted(p.stem for p in CORPUS.glob("tc_corpus_*.py") if p.stem not in ("tc_corpus_case", "tc_corpus_lib"))
CASES: list[Any] = [case for m in _MODULES for case in importlib.import_module(m).CASES]
SM90 = Target("sm_90")


def _spec(kernel: Callable[..., object], consts: dict[str, Any], options: CompileOptions) -> Specialization:
    params: dict[str, ArraySpec] = {}
    for p in resolve(parse(kernel)).params:
        if p.kind in ("tensor", "mut") and p.dtype is not None:
            n = len(p.shape)
            params[p.name] = ArraySpec(p.dtype.name, n, stride_one=tuple(i == n - 1 for i in range(n)))
    return Specialization.make(params=params, consts=consts, options=options)


def _lowered(kernel: Callable[..., object], consts: dict[str, Any], options: CompileOptions) -> ir.Function:
    typed = typecheck(resolve(parse(kernel)), _spec(kernel, consts, options), SM90, (13, 4))
    return lower(typed, SM90).module.functions[0]


def test_every_corpus_kernel_compiled_for_pdl_orders_every_access_after_its_wait() -> None:
    """All 111 corpus kernels (helpers, loops, tuples, guards, subtiles, unchecked raw memory and atomics) lower with
    ``pdl=True`` through the check, each has accesses, and the only foreign token root is the guard's fault store."""
    assert len(CASES) >= 100
    fault_stores = 0
    for case in CASES:
        fn = _lowered(case.kernel, dict(case.consts), dataclasses.replace(case.options, pdl=True))
        check_entry_wait(fn)  # (lower ran it too)
        ops = list(fn.walk())
        assert ops[0].name == "gdc_wait_tko", case.name
        assert any(op.name in MEMORY_OPS for op in ops), case.name
        fault_stores += sum(op.name == "make_token" for op in ops)
    assert fault_stores > 0  # the guard's pattern was met, and allowed


@pytest.fixture
def corpus_pdl() -> ModuleType:
    return importlib.import_module("tc_corpus_pdl")


def _fresh_chain_for_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: each view load starts its chain at a new ``make_token`` (not ordered after the wait)."""
    original = Checker.load_view

    def load_view(self: Any, p: Any, index: Any, hints: Any, *, trusted: bool = False) -> Any:
        key = f"$tok:{p.tensor.name}" if p.tensor.mut else ENTRY_TOKEN
        saved = self.env[key]
        self.env[key] = self.em.one("make_token", [], TokenType())
        try:
            return original(self, p, index, hints, trusted=trusted)
        finally:
            if not p.tensor.mut:
                self.env[key] = saved

    monkeypatch.setattr(Checker, "load_view", load_view)


def _chain_after_the_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: ``launch_dependents`` "ordered" by making its (rootless) token the entry chain's head."""

    def op_launch_dependents(self: Any, op: Any, a: Any) -> object:
        for key in [k for k in self.env if k.startswith("$tok:")]:
            self.env[key] = self.em.one("gdc_launch_dependents_tko", [None], TokenType())
        return None

    monkeypatch.setattr(Checker, "op_launch_dependents", op_launch_dependents)


def _untokened_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: stores emitted without a token operand (free to move above the wait)."""
    original = Checker.emit_store

    def emit_store(self: Any, *args: Any, injective: bool) -> None:
        value, view, idx = args[:3]
        self.em.emit("store_view_tko", [value, view, idx, None], [TokenType()], {"memory_ordering_semantics": "weak"})
        original(self, *args, injective=injective)

    monkeypatch.setattr(Checker, "emit_store", emit_store)


@pytest.mark.parametrize("regression", [_fresh_chain_for_loads, _chain_after_the_hint, _untokened_stores])
def test_a_pdl_kernel_with_an_access_not_ordered_after_its_wait_is_refused(
    regression: Callable[[pytest.MonkeyPatch], None], monkeypatch: pytest.MonkeyPatch, corpus_pdl: ModuleType
) -> None:
    """Hole: ``waits_prior_grid`` came from the option alone. With an emitter that starts a chain elsewhere, the PDL
    kernel compiled (and would launch early, racing its predecessor); now lower refuses it, typed. The same broken
    emitter still compiles the kernel without pdl (launched plainly: stream order keeps it safe)."""
    regression(monkeypatch)
    kernel, consts = corpus_pdl.rowsum_loop, {"BM": 8, "BN": 16}  # the hint first, then a loop of loads
    with pytest.raises(PdlOrderError, match=r"rowsum_loop: compiled for programmatic dependent launch"):
        _lowered(kernel, consts, CompileOptions(pdl=True))
    ops = [op.name for op in _lowered(kernel, consts, CompileOptions(pdl=False)).walk()]
    assert "gdc_wait_tko" not in ops


def test_the_guard_fault_store_is_the_only_exception_and_only_at_its_address() -> None:
    """A kernel with index guards keeps its fault stores (make_token roots) under pdl; the same store aimed at any
    other constant address is refused (it could be an argument's memory)."""
    case = next(c for c in CASES if c.name == "chunks_reversed")
    fn = _lowered(case.kernel, dict(case.consts), dataclasses.replace(case.options, pdl=True))
    stores = [op for op in fn.walk() if op.name == "store_ptr_tko" and op.operands[-1].defining_op is not None]
    faults = [op for op in stores if op.operands[-1].defining_op.name == "make_token"]  # type: ignore[union-attr]
    assert faults
    check_entry_wait(fn)
    cast = faults[0].operands[0].defining_op
    assert cast is not None
    address = cast.operands[0].defining_op
    assert address is not None
    attr = address.attributes["value"]
    address.attributes["value"] = dataclasses.replace(attr, data=(32).to_bytes(8, "little"))  # type: ignore[type-var]
    with pytest.raises(PdlOrderError, match="the token of make_token"):
        check_entry_wait(fn)


def test_the_wait_must_be_the_first_op() -> None:
    """A wait placed after an access (or missing) does not cover it."""
    case = next(c for c in CASES if c.name == "scale_then_release")
    fn = _lowered(case.kernel, dict(case.consts), dataclasses.replace(case.options, pdl=True))
    first = fn.body.ops.pop(0)
    fn.body.ops.insert(3, first)
    with pytest.raises(PdlOrderError, match=r"its first op is .* not the entry wait"):
        check_entry_wait(fn)


# ---- GPU (lead's batch) ---------------------------------------------------------------------------------------------

PDL_SOURCE = """
import tile.frontend as tile
from tile.frontend import Const, Mut, Tensor, f32


@tile.function
def _sum(x, y, z):
    return tile.load_tile_like(x, z) + tile.load_tile_like(y, z)


@tile.entry(pdl=True)
def add_pdl(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    tile.launch_dependents()  # before the stores: the next PDL kernel may start now and must still wait
    z.store(_sum(x, y, z))


@tile.entry(pdl=True)
def rowsum_pdl(z: Mut[Tensor[f32, ("BM", 1)]], x: Tensor[f32, (-1, -1)], BN: Const[int]):
    tile.launch_dependents()  # first: the dependent may start while this whole loop runs
    px = x.partition((BM, BN), padding="zero")
    acc = tile.zeros((BM, 1), f32)
    for j in range(px.num_tiles[1]):
        acc = acc + tile.sum(px.load((tile.block_id()[0], j)), axis=1, keepdims=True)
    z.store(acc)


@tile.entry(pdl=True)
def plus_one_pdl(z: Mut[Tensor[f32, ("BM", 1)]], s: Tensor[f32, (-1, -1)]):
    z.store(tile.load_tile_like(s, z) + 1.0)
"""
N = 1 << 22


@pytest.fixture(scope="module")
def pk(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return load_source("review40_pdl_kernels", PDL_SOURCE, tmp_path_factory.mktemp("review40"))


@pytest.fixture
def on_gpu() -> Iterator[None]:
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_gpu_a_pdl_graph_fed_by_graph_write_and_replayed_on_two_streams(on_gpu: None, pk: ModuleType) -> None:
    """Each replay's first PDL kernel follows a copy (graph_write) and the previous replay's last kernel, which let
    dependents start before its stores; replays alternate between two streams. Every output is exact."""
    import tile.core as tc

    x = tile.zeros(f32, [N])

    def step(out: tuple[Any, ...]) -> Any:
        return pk.add_pdl(tile.zeros(f32, [N]).partition([1024]), out[0].unpartition(), tile.ones(f32, [N]))

    op = pk.add_pdl(tile.zeros(f32, [N]).partition([1024]), x[()], tile.ones(f32, [N]))
    for _ in range(7):
        op = op.then(step)
    graph = op.graph()
    assert graph.kind == "cuda"
    streams = [tc.Device(0).create_stream(), tc.Device(0).create_stream()]
    for i, v in enumerate((1.0, 5.0, 9.0, 13.0)):
        stream = streams[i % 2]
        x = tile.graph_write(graph, x, np.full(N, v)).sync_on(stream)
        out = graph.launch().then(lambda _: tile.graph_read(graph, graph.output[0])).sync_on(stream)
        np.testing.assert_array_equal(out.to_numpy(), np.full(N, v + 8, np.float32))
    graph.close()


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_gpu_a_pdl_chain_reading_tensors_made_between_its_launches(on_gpu: None, pk: ModuleType) -> None:
    """Each PDL launch reads a tensor created (filled) after the previous launch was queued: the fill is stream work
    between two kernels, and the PDL kernel's wait must not let it read the tensor early."""

    def step(i: int) -> Callable[[tuple[Any, ...]], Any]:
        return lambda out: pk.add_pdl(
            tile.zeros(f32, [N]).partition([1024]), out[0].unpartition(), tile.full(f32, [N], float(i))
        )

    op = pk.add_pdl(tile.zeros(f32, [N]).partition([1024]), tile.zeros(f32, [N]), tile.full(f32, [N], 0.0))
    for i in range(1, 24):
        op = op.then(step(i))
    z, _, _ = op.sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, sum(range(24)), np.float32))


# ---- tile.distributed between PDL launches (CPU, gloo) --------------------------------------------------------------


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("torch")
    import tile.frontend.distributed as d

    store = tmp_path_factory.mktemp("dist40") / "store"
    d.init("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield d
    d.destroy()


def _pdl_reduce_pdl(pk: ModuleType, group: Any, x: Any) -> Any:
    """PDL kernel -> all_reduce of its output -> PDL kernel reading the reduced tensor."""
    first = pk.add_pdl(tile.zeros(f32, [64]).partition([16]), x, tile.ones(f32, [64]))
    reduced = first.then(lambda out: group.all_reduce(out[0].unpartition()))
    return reduced.then(lambda t: pk.add_pdl(tile.zeros(f32, [64]).partition([16]), t, tile.ones(f32, [64])))


def test_a_collective_between_pdl_launches_in_a_chain_and_in_a_graph(path: str, pk: ModuleType, group: Any) -> None:
    """The collective's tensor is moved in (a use is refused while the chain holds it) and handed on; run directly
    and replayed as a graph (twice), the result is exact and the input comes back only once the graph is closed."""
    assert pk.add_pdl.compile(tile.zeros(f32, [64]).partition([16]), tile.ones(f32, [64]), tile.ones(f32, [64])).abi
    x = tile.full(f32, [64], 2.0)
    z, _, _ = _pdl_reduce_pdl(pk, group, x).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(64, 4.0, np.float32))
    x = tile.full(f32, [64], 5.0)
    graph = _pdl_reduce_pdl(pk, group, x).graph()
    with pytest.raises(tile.MovedError, match=r"was moved into the launch of add_pdl"):
        x.to_numpy()
    for _ in range(2):
        graph.launch().sync()
    z, _, _ = graph.output
    with pytest.raises(tile.InFlightError, match=r"was captured into a graph"):
        z.unpartition().to_numpy()
    graph.close()
    np.testing.assert_array_equal(graph.output[0].unpartition().to_numpy(), np.full(64, 7.0, np.float32))


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_gpu_a_slow_primary_that_lets_dependents_start_first_is_still_waited_for(on_gpu: None, pk: ModuleType) -> None:
    """The primary calls ``launch_dependents`` before a long loop and its stores (poisoned beforehand); the dependent
    PDL kernel reads them. Were the hint taken for completion, it would read NaN."""
    m, n = 8192, 4096
    x = np.random.default_rng(40).standard_normal((m, n)).astype(np.float32)
    sums = pk.rowsum_pdl(tile.full(f32, [m, 1], np.nan).partition([8, 1]), tile.from_numpy(x), BN=64)
    op = sums.then(lambda out: pk.plus_one_pdl(tile.full(f32, [m, 1], np.nan).partition([8, 1]), out[0].unpartition()))
    for _ in range(3):
        op = op.then(
            lambda out: pk.plus_one_pdl(tile.full(f32, [m, 1], np.nan).partition([8, 1]), out[0].unpartition())
        )
    z, _ = op.sync()
    got = z.unpartition().to_numpy()
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got[:, 0], x.astype(np.float64).sum(1) + 4, rtol=1e-4, atol=1e-2)
