"""matmul_op and rmsnorm_op on the CPU interpreter: the launch-returning forms compose in one ``.then()`` chain (each
output unpartitioned in flight and passed on), match the waiting forms bit for bit, and can be captured and replayed."""

from __future__ import annotations

import re
import sys
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tile.frontend as tile
import tile.kernels as tk
from tile import aio
from tile.frontend import ArgumentError, InFlightError, bf16

SPLIT = tk.Config.of(BM=16, BN=16, BK=16, GROUP=1, SPLIT=2)
PLAIN = tk.Config.of(BM=16, BN=16, BK=16, GROUP=1, SPLIT=1)


def _bf16(rng: np.random.Generator, *shape: int) -> tile.Tensor:
    return tile.from_numpy(rng.standard_normal(shape).astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize("config", [PLAIN, SPLIT], ids=["plain", "split-k"])
def test_a_chain_of_ops_matches_the_waiting_calls(config: tk.Config) -> None:
    rng = np.random.default_rng(0)
    x, w1, w2, g = _bf16(rng, 2, 48), _bf16(rng, 40, 48), _bf16(rng, 48, 40), _bf16(rng, 48)
    h = tk.rmsnorm(x, g, eps=1e-6)
    want = tk.matmul(tk.matmul(h, w1.T, config=config), w2.T, residual=x, config=config).to_numpy()
    seen: list[bool] = []

    def second(out: tuple[Any, ...]) -> Any:
        h = out[0].unpartition()
        seen.append(h.in_flight)
        return tk.matmul_op(h, w1.T, config=config)

    def third(out: tuple[Any, ...]) -> Any:
        return tk.matmul_op(out[0].unpartition(), w2.T, residual=x, config=config)

    got = tk.rmsnorm_op(x, g, eps=1e-6).then(second).then(third).sync()[0].unpartition()
    assert seen == [True]  # the chain passed h on before its writer was done
    np.testing.assert_array_equal(got.to_numpy(), want)
    assert not x.moved  # borrowed inputs stay usable
    assert not w1.moved


def test_a_captured_chain_replays_on_the_cpu() -> None:
    rng = np.random.default_rng(1)
    x, w = _bf16(rng, 1, 32), _bf16(rng, 32, 32)
    want = tk.matmul(tk.matmul(x, w.T, config=SPLIT), w.T, config=SPLIT).to_numpy()
    stream = aio.HostStream()
    chain = tk.matmul_op(x, w.T, config=SPLIT).then(lambda o: tk.matmul_op(o[0].unpartition(), w.T, config=SPLIT))
    graph = chain.graph(stream)
    for _ in range(2):
        graph.launch().sync_on(stream)
    z = graph.close()[0].unpartition()
    np.testing.assert_array_equal(z.to_numpy(), want)


def test_an_in_flight_operand_escaping_the_chain_stays_unusable() -> None:
    rng = np.random.default_rng(2)
    x, w = _bf16(rng, 1, 16), _bf16(rng, 16, 16)
    kept: list[tile.Tensor] = []

    def keep(out: tuple[Any, ...]) -> Any:
        kept.append(out[0].unpartition())
        return tk.rmsnorm_op(x, tile.ones(bf16, [16]))

    tk.matmul_op(x, w.T, config=PLAIN).then(keep).sync()
    with pytest.raises(InFlightError, match="may only pass it to a launch it returns"):
        kept[0].to_numpy()


def test_op_forms_refuse_bad_arguments() -> None:
    x = tile.zeros(bf16, [2, 4, 8])
    with pytest.raises(ArgumentError, match="rmsnorm_op: x must have 2 dimensions"):
        tk.rmsnorm_op(x, tile.ones(bf16, [8]))
    with pytest.raises(ArgumentError, match="matmul_op: inner dimensions differ"):
        tk.matmul_op(tile.zeros(bf16, [2, 8]), tile.zeros(bf16, [4, 8]))
    with pytest.raises(ArgumentError, match="matmul_op: the result \\[0, 8\\] is empty"):
        tk.matmul_op(tile.zeros(bf16, [0, 8]), tile.zeros(bf16, [8, 8]))


def test_a_library_call_s_errors_name_the_callers_line() -> None:
    """Messages name the user's line, not tile.kernels' or contextlib's: ``out=`` is partitioned inside an
    ``ExitStack`` in tile.kernels, and the site of that move used to read ``contextlib.py:517``."""
    x, w, o = tile.ones(tile.f32, [4, 8]), tile.ones(tile.f32, [8]), tile.zeros(tile.f32, [4, 8])
    op = tk.rmsnorm_op(x, w, out=o)
    line = sys._getframe().f_lineno - 1
    with pytest.raises(tile.MovedError, match=rf"moved into .* at {re.escape(__file__)}:{line};"):
        o.to_numpy()
    op.sync()
