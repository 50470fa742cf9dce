"""The matmul family's Python API: `matmul` (persistent grouped GEMM with a fused epilogue; for decode sizes M <= 16
the GEMV forms of `_gemv`, or split-K where N is too small for them) and `bmm` (batched GEMM). Kernels are in
``_gemm_kernels.tilepy``; configs come from the autotuner (see `autotune`).

Inputs are borrowed for the call (the caller's handles stay usable), the output is new or ``out=`` (moved in; use
the returned tensor). `matmul` and `bmm` wait for their GPU work and return the result tensor; `matmul_op` returns the
op (a launch, or the split-K pair chained with ``.then()``) for chains and graph captures.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from typing import Any

import tile.frontend as tile
from tile.aio import DeviceOp
from tile.frontend import ArgumentError, BackendError, DType, Tensor, f32
from tile.kernels import _args, _fused, _gemv, autotune
from tile.kernels import _gemm_configs as configs
from tile.kernels._source import kernels, source_digest

__all__ = ["ACTIVATIONS", "bmm", "matmul", "matmul_op"]

ACTIVATIONS = {None: 0, "relu": 1, "silu": 2, "gelu": 3, "gelu_tanh": 4}
_IN = ("f16", "bf16", "f32", "f8e4m3fn", "f8e5m2")
_F8 = frozenset({"f8e4m3fn", "f8e5m2"})
_L2_SPAN = 128 << 20  # bytes of weight copies a decode tuning sample rotates over: more than any GPU's L2 cache
_STEM = "_gemm_kernels"
_Op = DeviceOp[tuple[Any, ...]]


def _default_out(a: Tensor) -> DType:
    return tile.bf16 if a.dtype.name in _F8 else a.dtype


def _check_f8(dtype: DType, op: str) -> None:
    if dtype.name in _F8 and tile.backend() == "gpu":
        from tile import core

        cc = core.Device(0).compute_capability
        if tuple(cc) < (8, 9):
            raise BackendError(
                f"{op}: {dtype.name} matrix multiply needs sm_89 or newer; this GPU is sm_{cc[0]}{cc[1]}"
            )


def _optional(value: object, name: str, op: str, shape: Sequence[int]) -> Tensor | None:
    if value is None:
        return None
    t = _args.as_input(value, name, op)
    _args.check_dtype(t, name, op, _args.FLOATS)
    _args.check_shape(t, name, op, shape)
    return t


def matmul(
    a: object,
    b: object,
    *,
    bias: object = None,
    activation: str | None = None,
    residual: object = None,
    out_dtype: object = None,
    out: object = None,
    config: autotune.Config | None = None,
    norm: object = None,
    eps: float = 1e-6,
    swiglu: bool = False,
) -> Tensor:
    """``activation(a @ b + bias) + residual``, accumulated in f32, cast to ``out_dtype``.

    Parameters
    ----------
    a, b
        ``(M, K)`` and ``(K, N)`` of one dtype: f16, bf16, f32, or f8 (``f8e4m3fn``/``f8e5m2``, sm_89+). Any strides
        (``w.T`` of an ``(N, K)`` weight works); any M, N, K (edge tiles are padded on load and masked on store).
    bias
        Optional ``(N,)``, added to every row (f16/bf16/f32).
    activation
        None, ``"relu"``, ``"silu"``, ``"gelu"`` (erf form, |error| < 2e-7) or ``"gelu_tanh"``.
    residual
        Optional ``(M, N)``, added after the activation.
    out_dtype
        f16, bf16 or f32; default ``out``'s dtype if given, else ``a``'s (bf16 for f8 inputs).
    out
        Optional ``(M, N)`` output tensor (f16, bf16 or f32); it is moved into the call: use the returned tensor.
    config
        A hand-picked `autotune.Config` (BM, BN, BK, GROUP, SPLIT; for the decode GEMV forms also FORM, LAT, TMA,
        OCC, see `tile.kernels._gemv`); default: the tuned one (the default config on the CPU interpreter or with
        ``TILE_AUTOTUNE=0``).
    norm, eps
        Optional ``(K,)`` RMSNorm weight: the result is ``rmsnorm(a, norm, eps=eps) @ b`` (Qwen3's norm before a
        projection), the norm fused into the GEMV forms' prologue for M <= 16 (see `tile.kernels._fused`).
    swiglu
        True: ``b`` is a fused ``(K, 2 * I)`` gate/up weight (gate columns first) and the result is the ``(M, I)``
        ``silu(a @ gate) * (a @ up)``, applied in the GEMV forms' epilogue for M <= 16 and in the persistent GEMM's
        above (``gemm_glu``: two accumulators a tile, BM * BN <= `_fused.GLU_TILE`, SPLIT=1); no bias, activation or
        residual with it. Fused calls are tuned apart (for M <= 16 over the plain GEMV candidates, split-K too); above
        M = 16 ``norm`` runs `tk.rmsnorm` first, chained. Neither fusion takes f8.

    Returns
    -------
    Tensor
        The ``(M, N)`` result. SPLIT > 1 runs split-K: each block sums one of SPLIT runs of consecutive K tiles into its
        own slice of an f32 ``(SPLIT, M, N)`` scratch tensor, and a second kernel adds the slices and applies the
        epilogue, so no two blocks ever write one element. FORM 1, 2 or 3 (the GEMV forms, what M <= 16 gets where N
        allows) runs one block per ``(BM, BN)`` output tile, each walking all of K, epilogue included: one kernel.

    Raises
    ------
    ArgumentError
        Wrong ranks, shapes, dtypes, activation or config.
    BackendError
        f8 on a GPU older than sm_89.
    """
    op = "matmul"
    x, y = _args.as_input(a, "a", op), _args.as_input(b, "b", op)
    fuse = {"norm": norm, "eps": eps, "swiglu": swiglu}
    res = _optional_in(residual, op)
    call = _MatmulCall(op, x, y, bias=bias, activation=activation, residual=res, out=out, out_dtype=out_dtype, **fuse)
    if call.empty:
        return call.z
    return _args.first_output(call.launch(config, call.z).sync())


def matmul_op(
    a: object,
    b: object,
    *,
    bias: object = None,
    activation: str | None = None,
    residual: object = None,
    out_dtype: object = None,
    out: object = None,
    config: autotune.Config | None = None,
    norm: object = None,
    eps: float = 1e-6,
    swiglu: bool = False,
) -> DeviceOp[tuple[Any, ...]]:
    """`matmul` as an op that is not run yet: it composes in ``.then()`` chains and graph captures (no wait inside).

    Arguments as in `matmul`; in addition ``a`` and ``residual`` may be tensors in flight (``z.unpartition()`` of the
    previous launch's output inside a ``.then()`` function): they are moved into the launch, which runs after their
    writer. Other tensors are borrowed as in `matmul`. The config is chosen when the op is made (tuned on scratch
    inputs of the same shapes if it is not remembered yet, so tune before a graph capture, e.g. by one eager call).

    Returns
    -------
    DeviceOp
        Runs the kernel (split-K: the two kernels, chained); its output is the last launch's argument tuple, whose
        first element is the output partition: ``op.sync()[0].unpartition()`` is the ``(M, N)`` result, and inside a
        ``.then()`` function ``out[0].unpartition()`` passes it on in flight. The second is ``a`` as given (with
        ``norm``: the un-normed rows, e.g. a residual stream, handed back).

    Raises
    ------
    ArgumentError
        As `matmul`; also for ``M == 0`` or ``N == 0`` (there would be no launch to return).
    """
    op = "matmul_op"
    x, y = _args.operand(a, "a", op), _args.as_input(b, "b", op)
    fuse = {"norm": norm, "eps": eps, "swiglu": swiglu}
    res = _optional_in(residual, op)
    call = _MatmulCall(op, x, y, bias=bias, activation=activation, residual=res, out=out, out_dtype=out_dtype, **fuse)
    if call.empty:
        raise ArgumentError(f"{op}: the result {list(call.z.shape)} is empty; there is nothing to launch")
    return call.launch(config, call.z)


def _no_bias() -> Any:
    return _args.placeholder(f32, 1)


def _no_res() -> Any:
    return _args.placeholder(f32, 2)


def _optional_in(value: object, op: str) -> Tensor | None:
    return None if value is None else _args.operand(value, "residual", op)


class _MatmulCall:
    """One checked matmul: operands, epilogue and output; `launch` makes the op for a config (tuned if None)."""

    def __init__(
        self,
        op: str,
        x: Tensor,
        y: Tensor,
        *,
        bias: object,
        activation: str | None,
        residual: Tensor | None,
        out: object,
        out_dtype: object,
        norm: object = None,
        eps: object = 1e-6,
        swiglu: object = False,
    ) -> None:
        _args.ensure_rank(x, "a", op, 2)
        _args.ensure_rank(y, "b", op, 2)
        _args.check_dtype(x, "a", op, _IN)
        if y.dtype != x.dtype:
            raise ArgumentError(f"{op}: a is {x.dtype.name} but b is {y.dtype.name}; convert one so they match")
        (m, k), (k2, n) = x.shape, y.shape
        if k != k2:
            raise ArgumentError(f"{op}: inner dimensions differ: a is {list(x.shape)}, b is {list(y.shape)}")
        if activation not in ACTIVATIONS:
            raise ArgumentError(f"{op}: activation {activation!r} is not one of {sorted(map(str, ACTIVATIONS))}")
        _check_f8(x.dtype, op)
        plain = activation is None and bias is None and residual is None
        self.fused = _fused.fusion(op, x.dtype.name, k, n, norm=norm, eps=eps, swiglu=swiglu, plain_epilogue=plain)
        if self.fused is not None and self.fused.swiglu:
            n //= 2  # the output: the gate half's width
        self.op, self.x, self.y, self.m, self.n, self.k = op, x, y, m, n, k
        self.bias = _optional(bias, "bias", op, (n,))
        if residual is not None:
            _args.check_dtype(residual, "residual", op, _args.FLOATS)
            _args.check_shape(residual, "residual", op, (m, n))
        self.res = residual
        self.z = _args.output(out, out_dtype, _default_out(x), (m, n), op)
        self.empty = m == 0 or n == 0
        self.epi = (activation, self.bias is not None, residual is not None)

    def launch(self, config: autotune.Config | None, z: Tensor) -> DeviceOp[tuple[Any, ...]]:
        """The op writing ``z`` with ``config`` (the tuned one when None; tuning times fresh scratch operands)."""
        fused = self.fused
        if fused is not None and self.m > _fused.MAX_M:  # the big-M GEMM (its SwiGLU epilogue), after the norm
            glu = _fused.Fusion(None, fused.eps, True) if fused.swiglu else None
            big = config if config is not None else self._choose(glu)
            configs.check_config(big, self.op)
            _fused.check_big(big, glu, self.op)
            k_y = self.y
            # ``z`` (maybe the caller's out=) is the op's from now on, as the other forms' partition: held in a
            # partition until the GEMM runs (it launched after the norm had run, so the caller could still read,
            # write or lend ``out`` meanwhile); a refused norm launch gives it back.
            with tile.partitioned(z, [1] * z.ndim) as held:

                def project(h: Tensor) -> _Op:
                    out = held.unpartition()
                    return _launch_matmul(
                        big, out, x=h, y=k_y[()], bias=_no_bias(), res=_no_res(), epi=self.epi, fused=glu
                    )

                return _fused.composed(fused, self.x, project)
        if config is None:
            config = self._choose(fused)
        configs.check_config(config, self.op)
        _fused.check(config, fused, self.op)
        b_arg = self.bias[()] if self.bias is not None else _no_bias()
        r_arg = self.res if self.res is not None else _no_res()
        return _launch_matmul(config, z, x=self.x, y=self.y, bias=b_arg, res=r_arg, epi=self.epi, fused=fused)

    def _choose(self, fused: _fused.Fusion | None) -> autotune.Config:
        """The tuned config of this call run with ``fused`` (the call's own, or the part the big-M GEMM takes)."""
        m, n, k, x, z_dtype, epi = self.m, self.n, self.k, self.x, self.z.dtype, self.epi
        tuner = autotune.tuner("matmul", source_digest(_STEM) + source_digest(_fused.SPLIT_STEM))
        # The raw parameters the key is built from: a remembered choice is found without the key, the candidates
        # and the default (most of an eager decode matmul's host time before this).
        tag = "" if fused is None else fused.tag()
        recall = (m, n, k, x.dtype.name, z_dtype.name, epi, tag, autotune.environment_items())
        found = tuner.recall(recall)
        if found is not None:
            return found
        # Decode shapes are keyed finely (N = 6144 and 8192 may want different tiles); larger M by powers of two.
        shape = autotune.fine_bucket if m <= 16 else autotune.bucket
        key: dict[str, object] = {"m": autotune.bucket(m), "n": shape(n), "k": shape(k), "dtype": x.dtype.name}
        key |= {"out": z_dtype.name, **autotune.environment(), "epilogue": list(map(str, epi))}
        if fused is not None:  # a fused call is tuned apart (its own candidates, its own winner)
            key["fused"] = tag
        wide = configs.decode_candidates(m, n) if m <= 16 else configs.big_candidates(m, n)
        if m > 16 and wide != configs.WIDE:  # a ragged last wave (an exact-shape matter the n bucket hides) is
            key["waves"] = "ragged"  # tuned apart

        scratch: list[tuple[Tensor, Tensor, Any, Any]] = []
        copies, launches = (1, 1) if m > 16 else (max(1, min(8, -(-_L2_SPAN // max(1, n * k * x.dtype.itemsize)))), 8)

        def operands(i: int) -> tuple[Tensor, Tensor, Any, Any]:
            # Scratch operands of the same shapes and layouts (the real ones may be in flight, not readable yet), made
            # once per tuning. A decode-sized sample is `launches` calls (one wait: the host round trip would swamp a
            # few-microsecond kernel) rotating over weight copies that together outgrow the L2 cache, so candidates
            # are timed streaming the weight from HBM as in a model, not re-reading a cached one.
            if not scratch:
                for _ in range(copies):
                    yt, yn = self.y.strides[0] < self.y.strides[1], self.y.shape[1]
                    ys = tile.zeros(x.dtype, [yn, k]).T if yt else tile.zeros(x.dtype, [k, yn])
                    bs = tile.zeros(f32, [n]) if epi[1] else _args.placeholder(f32, 1)
                    rs = tile.zeros(f32, [m, n]) if epi[2] else _args.placeholder(f32, 2)
                    scratch.append((tile.zeros(x.dtype, [m, k]), ys, bs, rs))
            xs, ys, bs, rs = scratch[i % copies]
            return xs[()], ys[()], bs[()] if epi[1] else bs, rs[()] if epi[2] else rs

        def launch(cfg: autotune.Config, i: int) -> DeviceOp[tuple[Any, ...]]:
            xs, ys, bs, rs = operands(i)
            z = tile.empty(z_dtype, [m, n])  # the norm weight (fused=) is the call's own: it is only read
            return _launch_matmul(cfg, z, x=xs, y=ys, bias=bs, res=rs, epi=epi, fused=fused)

        def chain(cfg: autotune.Config) -> DeviceOp[tuple[Any, ...]]:
            op = launch(cfg, 0)
            for i in range(1, launches):
                op = op.then(functools.partial(_discard, launch, cfg, i))
            return op

        # A decode sample is replayed from a graph captured once per config: eagerly, each link's host work (its
        # output's allocation, the launch) takes longer than a 10-30 us GEMV, so every candidate timed the same host
        # time and the pick was noise (a 129 us gate_up tile won over 27 us ones on an H200). Replayed, the
        # launches run back to back on the device, as in a model's decode graph; the graphs close after the tuning.
        graphs: dict[autotune.Config, Any] = {}
        closing = contextlib.ExitStack()  # closes every captured graph after the tuning, even if one close raises

        def run(cfg: autotune.Config) -> object:
            if m > 16:
                return _args.first_output(chain(cfg).sync())
            graph = graphs.get(cfg)
            if graph is None:
                graph = graphs[cfg] = closing.enter_context(chain(cfg).graph())
            return graph.launch().sync()

        candidates = wide
        default = configs.default(m, n, k)
        if fused is not None and m > _fused.MAX_M:  # the SwiGLU GEMM: the tiles whose two accumulators fit
            candidates = _fused.big_candidates(candidates)
            default = candidates[0] if self._gpu() else default
        elif fused is not None:
            candidates, default = (
                _fused.candidates(candidates, fused),
                _fused.default(n, configs.persistent_blocks(), self._gpu()),
            )
        with closing:
            return tuner.choose(key, candidates, default, run, recall=recall)

    @staticmethod
    def _gpu() -> bool:
        return tile.backend() == "gpu"


def _discard(make: Callable[[autotune.Config, int], _Op], cfg: autotune.Config, i: int, _: object) -> _Op:
    """``make(cfg, i)``, dropping the previous op's output (a ``.then`` function of the tuning samples)."""
    return make(cfg, i)


def _launch_matmul(
    config: autotune.Config,
    z: Tensor,
    *,
    x: Tensor,
    y: Tensor,
    bias: Any,
    res: Any,
    epi: tuple[str | None, bool, bool],
    fused: _fused.Fusion | None = None,
) -> DeviceOp[tuple[Any, ...]]:
    k = kernels(_STEM)
    bm, bn, bk, split = config["BM"], config["BN"], config["BK"], config["SPLIT"]
    m, n = z.shape
    flags = {"ACT": ACTIVATIONS[epi[0]], "HAS_BIAS": epi[1], "HAS_RES": epi[2]}
    if config.get("FORM", 0) != 0:
        return _gemv.launch(config, z, x=x, y=y, bias=bias, res=res, flags=flags, fused=fused)
    split = min(split, -(-x.shape[1] // bk))
    if fused is not None and config["SPLIT"] > 1:  # a fused decode split over K (`_fused.check` passed it)
        return _fused.launch_split(config, z, x=x, y=y, fused=fused)
    if fused is not None:  # the big-M SwiGLU GEMM (`_fused.check_big` passed the config); never run a fusion unfused
        if fused.norm is not None or not fused.swiglu or split > 1:
            raise ArgumentError(f"config {config}: the big GEMM fuses only SwiGLU, unsplit; the norm runs apart")
        inner = y.shape[1] // 2  # the gate and up halves, views of the borrowed weight
        tiles = -(-m // bm) * -(-n // bn)
        glu = k.gemm_glu.grid((min(configs.persistent_blocks(), tiles),))
        with tile.partitioned(z, [bm, bn]) as part:  # a refused launch gives ``out`` back to the caller
            made: DeviceOp[tuple[Any, ...]] = glu(part, x, y[:, :inner], y[:, inner:], BK=bk, GROUP=config["GROUP"])
        return made
    if split <= 1:
        tiles = -(-m // bm) * -(-n // bn)
        launch = k.gemm.grid((min(configs.persistent_blocks(), tiles),))
        with tile.partitioned(z, [bm, bn]) as part:  # a refused launch gives ``out`` back to the caller
            result: DeviceOp[tuple[Any, ...]] = launch(part, x, y, bias, res, BK=bk, GROUP=config["GROUP"], **flags)
        return result
    return _gemv.launch_split(k.gemm_split_k, split, z, (bm, bn), x=x, y=y, bias=bias, res=res, flags=flags, BK=bk)


def bmm(
    a: object, b: object, *, out_dtype: object = None, out: object = None, config: autotune.Config | None = None
) -> Tensor:
    """Batched ``a @ b``: ``(B, M, K) @ (B, K, N) -> (B, M, N)``, f32 accumulation, persistent over all output tiles.

    Dtypes, strides, ``out_dtype``, ``out`` and ``config`` (BM, BN, BK; GROUP and SPLIT are ignored) as in `matmul`.
    """
    op = "bmm"
    x, y = _args.as_input(a, "a", op), _args.as_input(b, "b", op)
    _args.ensure_rank(x, "a", op, 3)
    _args.ensure_rank(y, "b", op, 3)
    _args.check_dtype(x, "a", op, _IN)
    if y.dtype != x.dtype:
        raise ArgumentError(f"{op}: a is {x.dtype.name} but b is {y.dtype.name}; convert one so they match")
    (batch, m, k), (batch2, k2, n) = x.shape, y.shape
    if batch != batch2 or k != k2:
        raise ArgumentError(f"{op}: a is {list(x.shape)} and b is {list(y.shape)}; need (B, M, K) and (B, K, N)")
    _check_f8(x.dtype, op)
    z = _args.output(out, out_dtype, _default_out(x), (batch, m, n), op)
    if batch == 0 or m == 0 or n == 0:
        return z
    z_dtype = z.dtype

    def run(cfg: autotune.Config, z: Tensor | None = None) -> Tensor:
        target = z if z is not None else tile.empty(z_dtype, [batch, m, n])
        bm, bn = cfg["BM"], cfg["BN"]
        tiles = batch * -(-m // bm) * -(-n // bn)
        launch = kernels(_STEM).bmm.grid((min(configs.persistent_blocks(), tiles),))
        with tile.partitioned(target, [1, bm, bn]) as part:  # a refused launch gives ``out`` back
            return _args.first_output(launch(part, x[()], y[()], BK=cfg["BK"]).sync())

    if config is None:
        key: dict[str, object] = {
            "b": autotune.bucket(batch),
            "m": autotune.bucket(m),
            "n": autotune.bucket(n),
            "k": autotune.bucket(k),
        }
        key |= {"dtype": x.dtype.name, "out": z_dtype.name, **autotune.environment()}
        default = (
            configs.WIDE[0] if tile.backend() == "gpu" else autotune.Config.of(BM=32, BN=32, BK=32, GROUP=1, SPLIT=1)
        )
        config = autotune.tuner("bmm", source_digest(_STEM)).choose(key, configs.WIDE, default, run)
    configs.check_config(config, op)
    if config.as_dict().get("FORM", 0) != 0:
        raise ArgumentError(f"{op}: config {config}: the GEMV forms (FORM 1, 2, 3) are matmul's; give bmm BM, BN, BK")
    return run(config, z)
