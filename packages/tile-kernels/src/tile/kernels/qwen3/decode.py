"""`DecodeGraph`: Qwen3's one-token decode step captured once as a graph and replayed per token.

The step is the model's forward chain for one token (embedding, every layer, final norm, LM head: 9 or 10 launches
a layer, no host wait between them), captured with ``.graph()`` (a CUDA graph on the GPU, a recorded host schedule on
the CPU interpreter), ending with a one-block argmax of the logits. With ``Qwen3(..., pdl=True)`` its kernels are the
library's PDL ones, launched with programmatic stream serialization while the stream captures, which the driver
records as programmatic edges: in a replay each kernel may start while the one before it finishes. Its launches read
the token id and the position from one i32 device tensor ``[id, position]``; each token runs one chain of three ops
with one host wait: `tile.graph_write` of the new ``[id, position]`` (ordered after the previous replay), the replay,
and `tile.graph_read` of the f32 logits row (`step`, for host sampling) or of the greedy id alone (`greedy`).

While the graph is open it holds the model's KV cache (`Qwen3.forward` refuses to run); `close` hands it back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tile.frontend as tile
from tile import aio
from tile.frontend import ArgumentError, Tensor
from tile.kernels.qwen3._chain import Chain
from tile.kernels.qwen3.model import Qwen3, _token

__all__ = ["DecodeGraph"]


class DecodeGraph:
    """The decode step of ``model`` captured once (see the module docstring); `step` replays it for one token.

    Parameters
    ----------
    model
        The model; its KV cache belongs to the graph until `close` (also on ``with`` exit).
    on
        Where to capture and replay (a ``tile.aio`` context or a ``tile.core.Stream``); default: a stream of the
        model's device (a host stream on the CPU interpreter).

    Raises
    ------
    ArgumentError
        Another decode graph of this model is open.
    """

    def __init__(self, model: Qwen3, on: object = None) -> None:
        if model.graphed:
            raise ArgumentError("DecodeGraph: this model already has an open decode graph; close it first")
        self.model = model
        model.tune(1)
        device = model.embed.device
        ctx = aio.default_policy("host" if device == "cpu" else device).next_context() if on is None else on
        self._inputs: Tensor = tile.from_numpy(np.zeros(2, dtype=np.int32))
        self._chain = Chain(pdl=model.pdl)  # PDL kernels: captured with programmatic edges between them
        op = self._chain.build(model.steps(self._inputs, 1, head=True, argmax=True))
        model.graphed = True
        try:
            self.graph: aio.Graph[tuple[Any, ...]] = op.graph(ctx)
        except BaseException:
            model.graphed = False
            raise
        # The last launch is the argmax: its output partition is the greedy id, its second argument the logits.
        self._next, self._logits = self.graph.output[0], self.graph.output[1]

    @property
    def context(self) -> aio.ExecutionContext:
        """The context the graph replays on."""
        return self.graph.context

    def step(self, token: int) -> np.ndarray[Any, Any]:
        """Run ``token`` at the model's next position; return its f32 logits ``(vocab,)`` (one host wait).

        Raises `ArgumentError` (nothing run, state unchanged) for an id outside the vocabulary or a full cache.
        """
        out: np.ndarray[Any, Any] = self.model.logits_rows(self._run(token, self._logits))[0]
        return out

    def greedy(self, token: int) -> int:
        """Run ``token`` at the model's next position; return the id of its largest logit (the first on ties), found
        on the device: one int comes back instead of the logits row. Errors as `step`."""
        return int(self._run(token, self._next)[0])

    def _run(self, token: int, result: Any) -> np.ndarray[Any, Any]:
        model, graph = self.model, self.graph
        token = _token(token)
        if not 0 <= token < model.config.vocab_size:
            raise ArgumentError(f"qwen3: token id {token} is outside the vocabulary [0, {model.config.vocab_size})")
        model._check_room(1)
        kept: list[Tensor] = []

        def replay(inputs: Tensor) -> aio.DeviceOp[Any]:
            kept.append(inputs)  # in flight until the write is done; live once the chain is
            return graph.launch()

        op = tile.graph_write(graph, self._inputs, [token, model.length])
        op = op.then(replay).then(lambda _: tile.graph_read(graph, result))
        values = op.sync_on(self.context)
        self._inputs = kept[0]
        model.length += 1
        out: np.ndarray[Any, Any] = values.to_numpy()
        return out

    def close(self) -> None:
        """Wait for the last replay, free the graph and give the model its KV cache back (idempotent)."""
        if self.graph.closed:
            return
        self.graph.close()
        self.model.adopt_caches(self._chain)
        self.model.graphed = False

    def __enter__(self) -> DecodeGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
