"""The Qwen3 forward pass on Tile: `Qwen3` holds the weights and the KV cache, runs prefill and decode.

One layer is nine launches (ten in decode, nine when the cache is short): RMSNorm (`tk.rmsnorm`), the fused q/k/v
projection (`tk.matmul` on the concatenated weight), q RMSNorm+RoPE with k RMSNorm+RoPE and v into the caches (one
launch, the model's own fusion: `_ops.prep_qkv`), attention (decode: `tk.decode_attention_op`, one kernel up to
``ONE_KERNEL_SEQ`` (128) cache positions, else split over the sequence and combined, two kernels; a multi-token
pass: the library's flash attention `tk.attention_op` on the q rows against the caches, causal from the pass's first
position), the output projection with the residual add fused (`tk.matmul(..., residual=x)`), RMSNorm, the fused
gate/up projection, the SiLU-gated product (`tk.swiglu_fused`) and the down projection with the residual fused. The
embedding is `tk.embedding`, greedy decoding's last launch `tk.argmax`. Activations are bf16 between launches, every
kernel computes in f32.

Passes of up to 16 tokens (decode) fuse three of those launches away (``Qwen3(..., fuse=True)``, the default): the
RMSNorm before the q/k/v projection runs in its prologue (`tk.matmul_op(x, wqkv_t, norm=ln1)`), and the RMSNorm,
gate/up projection and SwiGLU are one kernel (`tk.matmul_op(x, wgu_t, norm=ln2, swiglu=True)`), so a decode layer is
six or seven launches. Longer passes (prefill) can fuse the SwiGLU into the big-tile gate/up GEMM's epilogue
(`tk.matmul_op(h, wgu_t, swiglu=True)` after the RMSNorm: the (n, 2I) gate/up product is never written; off by
default, `PREFILL_GLU`: it measured slower), eight
launches a layer; their norms stay apart (a big GEMM's every output tile would redo its rows' sum of squares).
``fuse=False`` runs the unfused nine at every length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

import tile.frontend as tile
import tile.kernels as tk
from tile.frontend import ArgumentError, FrozenError, Tensor, bf16, f32
from tile.kernels import _args, _fused
from tile.kernels.qwen3 import _ops
from tile.kernels.qwen3._cache import check_caches
from tile.kernels.qwen3._chain import Chain, Step
from tile.kernels.qwen3.config import Qwen3Config

__all__ = ["Qwen3", "rope_tables"]


def rope_tables(config: Qwen3Config, positions: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``cos`` and ``sin`` of RoPE angles ``p * theta ** (-2i / head_dim)``, ``(positions, head_dim // 2)`` f32,
    computed in float64."""
    half = config.head_dim // 2
    inv = config.rope_theta ** (-np.arange(half, dtype=np.float64) * 2.0 / config.head_dim)
    angles = np.arange(positions, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


@dataclass
class _Layer:
    ln1: Tensor
    wqkv: Tensor
    q_norm: Tensor
    k_norm: Tensor
    wo: Tensor
    ln2: Tensor
    wgu: Tensor
    wd: Tensor


class Qwen3:
    """A Qwen3 model on the current Tile backend, with a KV cache of ``max_seq`` positions (a power of two).

    Parameters
    ----------
    config
        The model's shape.
    weights
        Checkpoint tensors by their Hugging Face names (see `weights.load_checkpoint`, `weights.random_weights`);
        any mapping: each tensor is read once, in layer order, and uploaded before the next is read (a mapping that
        makes or loads tensors when read keeps only about one layer on the host).
    max_seq
        Positions the cache holds (prompt plus generated tokens); rounded up to a power of two.
    decode_attention
        How a one-token step attends: ``"split"`` (`tk.decode_attention_op` split over the sequence, a partial per
        run of key tiles and a combine: two kernels), ``"one"`` (one kernel, a block per group of query heads walking
        the whole sequence: one launch fewer, a longer serial walk), or ``"auto"`` (default): ``"one"`` when
        ``max_seq <= ONE_KERNEL_SEQ``, else ``"split"``. On an H200, Qwen3-4B with ``max_seq`` 1024 decoded 202
        tokens/s with ``"one"`` against ~275 with ``"split"``: the walk over the cache by 8 blocks costs more than
        the launch it saves, so ``"auto"`` takes one kernel only for short caches. The choice is fixed per model: a
        captured decode graph serves every length up to ``max_seq``, so it is made from ``max_seq``, not from the
        current length.

    fuse
        Fuse the RMSNorms into the projections after them and SwiGLU into the gate/up projection in passes of up to
        16 tokens (decode; default True), and SwiGLU into the gate/up GEMM in longer passes (prefill). False runs
        the unfused kernels, for A/B timings (the fused normed
        activation and gate/up product round to bf16 differently, within bf16 tolerance of each other). It may be
        set later (``model.fuse = False``; a `DecodeGraph` captured before keeps the form it captured).
    pdl
        Programmatic dependent launch (default True; sm_90+, elsewhere a plain launch): every pass's launches (and a
        `DecodeGraph`'s, captured as programmatic graph edges) are the library's PDL kernels, which wait at entry
        for the kernel before them, so each may be launched, and run its prologue, while that one finishes; the
        decode kernels also let their successor start early (``tile.launch_dependents()``). Same results either
        way; needs Tile IR bytecode 13.4+ (the default; a pinned older ``TILE_BYTECODE_VERSION`` needs ``pdl=False``).
        Measured on an H200, Qwen3-4B decode graph: 1.065x the tokens/s without it (``bench_qwen3.py --pdl both``).
        It may be set later, as ``fuse``.

    ``config`` and ``max_seq`` are read-only (`FrozenError`): the caches, the RoPE tables and the kernels'
    tiles were made for them, and the checks that refuse a bad call before the caches move read them. ``length`` is
    the one state a caller sets (checked against ``max_seq`` on every step).
    """

    _FIXED = frozenset({"config", "max_seq"})
    PREFILL_GLU = False
    """Whether a multi-token pass with ``fuse`` runs gate/up with the SwiGLU epilogue (`tk.matmul_op(h, wgu_t,
    swiglu=True)`, the (n, 2I) product never written) instead of the GEMM then `tk.swiglu_fused`. Off: on an H200
    (Qwen3-4B, 2048 tokens, `benchmarks/profile_prefill.py --glu`) the epilogue GEMM took 20.6 ms over 36 layers
    against 10.1 + 2.4 ms apart (two accumulators hold it to 128x128 tiles, 356 against 728 TFLOP/s)."""
    ONE_KERNEL_SEQ = 128
    """The largest ``max_seq`` whose decode attention is one kernel under ``decode_attention="auto"``."""

    def __init__(
        self,
        config: Qwen3Config,
        weights: Mapping[str, np.ndarray[Any, Any]],
        max_seq: int = 1024,
        *,
        decode_attention: str = "auto",
        fuse: bool = True,
        pdl: bool = True,
    ) -> None:
        if decode_attention not in ("auto", "one", "split"):
            raise ArgumentError(
                f"Qwen3: decode_attention={decode_attention!r}; pass 'auto', 'one' (one kernel) or 'split' (split over "
                "the sequence, then a combine)"
            )
        missing = [n for n in config.weight_shapes() if n not in weights]
        if missing:
            raise ArgumentError(f"Qwen3: weights lack {len(missing)} tensor(s), first {missing[0]!r}")
        self.config = config
        self.max_seq = _args.next_pow2(max(2, max_seq))
        one = decode_attention == "one" or (decode_attention == "auto" and self.max_seq <= self.ONE_KERNEL_SEQ)
        self._decode_splits = 1 if one else None  # None: the library sizes the split for the whole cache
        self.fuse = fuse
        self.pdl = pdl

        def put(*names: str) -> Tensor:
            parts = [np.asarray(weights[n], dtype=ml_dtypes.bfloat16) for n in names]
            return tile.from_numpy(np.ascontiguousarray(np.concatenate(parts) if len(parts) > 1 else parts[0]))

        c = config
        self.embed = put("model.embed_tokens.weight")
        self.layers = []
        for n in range(c.num_hidden_layers):
            p = f"model.layers.{n}."
            a, m = p + "self_attn.", p + "mlp."
            self.layers.append(
                _Layer(
                    ln1=put(p + "input_layernorm.weight"),
                    wqkv=put(a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"),
                    q_norm=put(a + "q_norm.weight").reshape(1, c.head_dim),
                    k_norm=put(a + "k_norm.weight").reshape(1, c.head_dim),
                    wo=put(a + "o_proj.weight"),
                    ln2=put(p + "post_attention_layernorm.weight"),
                    wgu=put(m + "gate_proj.weight", m + "up_proj.weight"),
                    wd=put(m + "down_proj.weight"),
                )
            )
        self.norm = put("model.norm.weight")
        self.lm_head = self.embed if c.tie_word_embeddings else put("lm_head.weight")
        cos, sin = rope_tables(c, self.max_seq)
        self.cos, self.sin = tile.from_numpy(cos), tile.from_numpy(sin)
        self.k_cache = [tile.zeros(bf16, [c.num_key_value_heads, self.max_seq, c.head_dim]) for _ in self.layers]
        self.v_cache = [tile.zeros(bf16, [c.num_key_value_heads, self.max_seq, c.head_dim]) for _ in self.layers]
        self.length = 0
        self.graphed = False  # a DecodeGraph holds the caches (see tile.kernels.qwen3.decode)
        self._tuned: set[int] = set()
        self._transposes: dict[int, tuple[Tensor, Tensor]] = {}

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._FIXED and name in self.__dict__:
            raise self._frozen(name)
        if name == "fuse":
            if not isinstance(value, bool):
                raise ArgumentError(f"Qwen3: fuse={value!r}; pass True (fused decode projections) or False")
            object.__setattr__(self, "_tuned", set())  # the other form's matmuls: tuned by the next pass (or graph)
        if name == "pdl" and not isinstance(value, bool):
            raise ArgumentError(f"Qwen3: pdl={value!r}; pass True (programmatic dependent launch) or False")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._FIXED:
            raise self._frozen(name)
        object.__delattr__(self, name)

    def _frozen(self, name: str) -> FrozenError:
        return FrozenError(
            f"Qwen3.{name} is read-only: the KV cache, the RoPE tables and the kernels' tiles were made for it, and a "
            "step would fail mid-way (losing the cache) if it changed; make a new Qwen3(config, weights, max_seq=...)"
        )

    def transposed(self, w: Tensor) -> Tensor:
        """``w.T`` of a weight, made once per model: the projections' steps pass it on every token (a view made per
        launch was host time; `tk.matmul_op` still borrows it through a fresh view of its own per launch)."""
        found = self._transposes.get(id(w))
        if found is None or found[0] is not w:  # keyed by identity, and holding w: an id is not reused meanwhile
            found = self._transposes[id(w)] = (w, w.T)
        return found[1]

    def weight_bytes(self) -> int:
        """Bytes of weights one token reads (every matrix and vector once; a tied embedding counted once)."""
        return 2 * self.config.num_parameters()

    def reset(self) -> None:
        """Forget the cached sequence (the next `forward` starts at position 0)."""
        self.length = 0

    def forward(self, ids: Sequence[int], *, all_logits: bool = False) -> np.ndarray[Any, Any]:
        """Run ``ids`` at the next positions of the cached sequence and return f32 logits.

        Returns the last token's logits ``(vocab,)``, or every token's ``(len(ids), vocab)`` with ``all_logits``.
        The layers run as one ``.then()`` chain (one host wait); one token's step includes the final norm and the
        LM head. Raises `ArgumentError` if the cache cannot hold the tokens or an id is outside the vocabulary.
        """
        ids = [_token(i) for i in ids]
        n, c = len(ids), self.config
        if n == 0:
            raise ArgumentError("Qwen3.forward: no tokens given")
        self._check_room(n)
        bad = [i for i in ids if not 0 <= i < c.vocab_size]
        if bad:
            raise ArgumentError(f"qwen3: token id {bad[0]} is outside the vocabulary [0, {c.vocab_size})")
        if self.graphed:
            raise ArgumentError("Qwen3.forward: a decode graph holds the KV cache; close it first (graph.close())")
        self.tune(n)
        inputs = tile.from_numpy(np.array([*ids, self.length], dtype=np.int32))
        chain = Chain(pdl=self.pdl)
        head = n == 1 or all_logits
        chain.finish(chain.build(self.steps(inputs, n, head=head, start=self.length)).sync())
        self.adopt_caches(chain)
        self.length += n
        if head:
            out = chain.take("logits")
        else:
            x = chain.take("x")
            tail = Chain(pdl=self.pdl, h=tk.rmsnorm(x[n - 1 : n], self.norm, eps=c.rms_norm_eps))
            tail.finish(tail.build(self.logits_steps(1)).sync())
            out = tail.take("logits")
        logits = self.logits_rows(out.to_numpy())
        return logits if all_logits else logits[-1]

    def _check_room(self, n: int) -> None:
        # `length` is a public attribute: a value the kernels would index the RoPE tables and the cache with out of
        # range (a negative one) is refused here, before the caches are moved into a chain that would fail mid-way.
        if type(self.length) is not int or not 0 <= self.length <= self.max_seq:
            raise ArgumentError(
                f"Qwen3: length is {self.length!r}, but it counts the cached tokens (an int from 0 to {self.max_seq}); "
                "call reset() to start a new sequence"
            )
        if self.length + n > self.max_seq:
            raise ArgumentError(
                f"Qwen3.forward: {self.length} cached + {n} new tokens exceed the cache of {self.max_seq} positions; "
                "make the model with a larger max_seq"
            )

    def steps(
        self, inputs: Tensor, n: int, *, head: bool, argmax: bool = False, start: int | None = None
    ) -> list[Step]:
        """The steps of one forward pass of ``n`` tokens for a `Chain`: the embedding, every layer, and with ``head``
        the final norm and the LM head (output ``"logits"``, f32 ``(n, vocab)``), and with ``argmax`` (one token) the
        greedy next id as the last launch (output ``"next"``, i32 ``(1,)``; the logits are its second argument); the
        residual stream is ``"x"``.

        ``inputs`` is an i32 device tensor ``[id_0, .., id_{n-1}, position of id_0]``; the launches borrow views of it
        made when they are (so a captured graph reads it and `tile.graph_write` can refill it between replays). The
        caches are taken from the model and filed back as ``"k{i}"`` / ``"v{i}"`` (see `adopt_caches`).

        A multi-token pass (``n > 1``) also needs the position of ``id_0`` on the host, ``start`` (it must be the one
        ``inputs`` holds; default `length`): its attention's causal offset in the cache is a launch argument. It is
        checked against the cache (`ArgumentError` if ``start + n`` passes ``max_seq``), and the caches are checked
        before any moves (`ArgumentError` for one replaced by a tensor of another shape, moved, freed or shared).
        """
        c = self.config
        check_caches(self.k_cache, self.v_cache, (c.num_key_value_heads, self.max_seq, c.head_dim), self.embed.device)
        first = self.length if start is None else _args.integer(start, "start", "Qwen3.steps")
        if n > 1 and not 0 <= first <= self.max_seq - n:
            raise ArgumentError(
                f"Qwen3.steps: {n} tokens from position {first} do not fit the cache of {self.max_seq} positions"
            )

        def pos() -> Tensor:
            return inputs[n : n + 1]

        def embed(ch: Chain) -> tuple[_ops.Op, dict[str, int]]:
            return tk.embedding_op(self.embed, inputs[0:n]), X

        steps: list[Step] = [embed]
        for i, layer in enumerate(self.layers):
            steps += self._layer_steps(i, layer, pos, n, first)
        if head:
            eps = c.rms_norm_eps
            steps.append(lambda ch: (tk.rmsnorm_op(ch.take("x"), self.norm, eps=eps), {"h": 0}))
            steps += self.logits_steps(n)
        if argmax:
            if not head or n != 1:
                raise ArgumentError("Qwen3.steps: argmax needs the LM head of one token")
            steps.append(lambda ch: (self.argmax_op(ch.take("logits")), {"next": 0, "logits": 1}))
        return steps

    # The four places tensor parallelism changes (tile.kernels.qwen3.tp overrides them).

    def residual_steps(self, name: str, w: Tensor) -> list[Step]:
        """Steps adding ``name @ w.T`` to the residual stream ``"x"``: the attention output and MLP down projections
        (here one matmul with the residual add fused)."""
        wt = self.transposed(w)
        return [lambda ch: (tk.matmul_op(ch.take(name), wt, residual=ch.take("x")), X)]

    def logits_steps(self, n: int) -> list[Step]:
        """Steps from the normed last hidden rows ``"h"`` (``n`` of them) to the f32 ``"logits"`` (the LM head)."""
        head = self.transposed(self.lm_head)
        return [lambda ch: (tk.matmul_op(ch.take("h"), head, out_dtype=f32), {"logits": 0})]

    def logits_rows(self, logits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The ``(n, vocab)`` rows of the host copy of a ``"logits"`` tensor."""
        return logits

    def argmax_op(self, logits: Tensor) -> _ops.Op:
        """The launch writing the greedy id of one token's ``"logits"`` (output: the id, then the logits)."""
        return tk.argmax_op(logits)

    def tune(self, n: int) -> None:
        """Choose the matmul and RMSNorm configs of an ``n``-token pass now (tuned on the GPU, on scratch inputs of
        the same shapes): a chain cannot tune inside its functions, which run while the chain executes."""
        if tile.backend() != "gpu" or n in self._tuned:
            return
        c, first = self.config, self.layers[0]
        x, h = tile.zeros(bf16, [n, c.hidden_size]), tile.zeros(bf16, [n, c.q_size])
        act = tile.zeros(bf16, [n, c.intermediate_size])
        if n > 1:  # the prefill attention's tiles (its tuning key: the shapes and the GQA ratio, not the offset)
            kv = tile.zeros(bf16, [c.num_key_value_heads, self.max_seq, c.head_dim])
            tk.attention(h, kv, kv, causal=True, offset=0)
        tk.rmsnorm(x, self.norm, eps=c.rms_norm_eps)
        if self._fused(n):
            tk.matmul(x, first.wqkv.T, norm=first.ln1, eps=c.rms_norm_eps)
            tk.matmul(x, first.wgu.T, norm=first.ln2, eps=c.rms_norm_eps, swiglu=True)
        else:
            tk.matmul(x, first.wqkv.T)
            tk.matmul(x, first.wgu.T, swiglu=self.fuse and self.PREFILL_GLU)
        tk.matmul(h, first.wo.T, residual=x)
        tk.matmul(act, first.wd.T, residual=x)
        if n == 1:
            tk.matmul(x, self.lm_head.T, out_dtype=f32)
        self._tuned.add(n)

    def adopt_caches(self, chain: Chain) -> None:
        """Take back the caches a finished chain filed (its launches moved the model's)."""
        for i in range(len(self.layers)):
            self.k_cache[i], self.v_cache[i] = chain.take(f"k{i}"), chain.take(f"v{i}")

    def _fused(self, n: int) -> bool:
        """Whether an ``n``-token pass runs the fused projections (the GEMV forms' sizes, see `tk.matmul`)."""
        return self.fuse and n <= _FUSED_ROWS

    def _layer_steps(self, i: int, layer: _Layer, pos: Callable[[], Tensor], n: int, start: int) -> list[Step]:
        c = self.config
        nq, eps = c.num_attention_heads, c.rms_norm_eps
        k, v = f"k{i}", f"v{i}"

        wqkv, wgu = self.transposed(layer.wqkv), self.transposed(layer.wgu)

        def prep(ch: Chain) -> _ops.Op:
            caches = (self.k_cache[i], self.v_cache[i])
            w = (layer.q_norm, layer.k_norm)
            qkv, cos, sin = ch.take("qkv"), self.cos, self.sin
            if n == 1:  # decode: a block per query head, the position read from the pos tensor only
                return _ops.prep_qkv(*caches, qkv, *w, heads=nq, eps=eps, cos=cos, sin=sin, pos=pos())
            # Many tokens: APPEND_TOKENS tokens a block, the caches in tiles of as many positions (many blocks write
            # them in parallel); the first position is a launch argument, as for the attention.
            tokens, p = min(_ops.APPEND_TOKENS, self.max_seq), pos()
            return _ops.prep_qkv(
                *caches, qkv, *w, heads=nq, eps=eps, cos=cos, sin=sin, pos=p, tokens=tokens, start=start
            )

        def attend(ch: Chain) -> tuple[_ops.Op, dict[str, int]]:
            q, kc, vc = ch.take("q"), ch.take(k), ch.take(v)
            if n == 1:  # decode: the library's kernels (one, or split + combine); pos + 1 rows of the cache are valid
                op = tk.decode_attention_op(q, kc, vc, pos(), plus=1, splits=self._decode_splits)
                return op, {"o": 0, k: 2, v: 3}
            # A multi-token pass: flash attention of the q rows (T, Hq * HD) against the caches, query t at cache
            # position start + t; the caches hold the pass's own keys already (written by prep_qkv).
            return tk.attention_op(q, kc, vc, causal=True, offset=start), {"o": 0, k: 2, v: 3}

        if self._fused(n):  # the norms in the projections' prologue, SwiGLU in gate/up's epilogue; x handed back
            qkv: list[Step] = [
                lambda ch: (tk.matmul_op(ch.take("x"), wqkv, norm=layer.ln1, eps=eps), {"qkv": 0, "x": 1}),
            ]
            mlp: list[Step] = [
                lambda ch: (
                    tk.matmul_op(ch.take("x"), wgu, norm=layer.ln2, eps=eps, swiglu=True),
                    {"act": 0, "x": 1},
                ),
            ]
        else:
            qkv = [
                lambda ch: (tk.rmsnorm_op(ch.take("x"), layer.ln1, eps=eps), {"h": 0, "x": 1}),
                lambda ch: (tk.matmul_op(ch.take("h"), wqkv), {"qkv": 0}),
            ]
            mlp = [lambda ch: (tk.rmsnorm_op(ch.take("x"), layer.ln2, eps=eps), {"h": 0, "x": 1})]
            if self.fuse and self.PREFILL_GLU:  # prefill: SwiGLU in the big GEMM's epilogue (off: see PREFILL_GLU)
                mlp.append(lambda ch: (tk.matmul_op(ch.take("h"), wgu, swiglu=True), {"act": 0}))
            else:
                mlp.append(lambda ch: (tk.matmul_op(ch.take("h"), wgu), {"gu": 0}))
                mlp.append(lambda ch: (tk.swiglu_fused_op(ch.take("gu")), {"act": 0}))
        return [
            *qkv,
            lambda ch: (prep(ch), {"q": 0, k: 1, v: 2}),
            attend,
            *self.residual_steps("o", layer.wo),
            *mlp,
            *self.residual_steps("act", layer.wd),
        ]


def _token(value: object) -> int:
    """A token id as an int: an int or a numpy integer (`ArgumentError` for a float, which would be truncated)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ArgumentError(f"qwen3: token id {value!r} is not an int; pass the tokenizer's integer ids")
    return int(value)


_FUSED_ROWS = _fused.MAX_M
"""The longest pass that runs the fused projections: up to it the matmuls are the GEMV forms, which fuse."""

X = {"x": 0}
"""The output names of a step whose output partition is the new residual stream."""
