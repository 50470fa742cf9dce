"""Property: any tree of combinators gives the same output and runs its host work in the same order in every
execution mode (sync inline, sync on a worker thread, await, graph replay), matching a pure model."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tile import aio

Spec = Any  # nested tuples: ("value", k) | ("host", k) | ("map", s) | ("zip", [s]) | ("collect", [s]) | ("then", s, s)

leaves = st.one_of(
    st.tuples(st.just("value"), st.integers(0, 9)),
    st.tuples(st.just("host"), st.integers(0, 9)),
)
specs = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.tuples(st.just("map"), inner),
        st.tuples(st.just("zip"), st.lists(inner, min_size=1, max_size=3)),
        st.tuples(st.just("collect"), st.lists(inner, max_size=3)),
        st.tuples(st.just("then"), inner, inner),
    ),
    max_leaves=12,
)


def model(spec: Spec) -> tuple[Any, list[int]]:
    """The output and host-work log the spec must produce."""
    kind = spec[0]
    if kind == "value":
        return spec[1], []
    if kind == "host":
        return (spec[1],), [spec[1]]
    if kind == "map":
        out, log = model(spec[1])
        return ("m", out), log
    if kind == "then":
        _, first = model(spec[1])
        out, second = model(spec[2])
        return out, first + second
    parts = [model(s) for s in spec[1]]
    outs = [p[0] for p in parts]
    return (tuple(outs) if kind == "zip" else outs), [k for p in parts for k in p[1]]


def build(spec: Spec, log: list[int]) -> aio.DeviceOp[Any]:
    kind = spec[0]
    if kind == "value":
        return aio.value(spec[1])
    if kind == "host":
        return aio.host_call(log.append, spec[1]).map(lambda args: args)
    if kind == "map":
        return build(spec[1], log).map(lambda out: ("m", out))
    if kind == "then":
        second = spec[2]
        return build(spec[1], log).then(lambda _: build(second, log))
    if kind == "zip":
        return aio.zip(*(build(s, log) for s in spec[1]))
    return aio.collect(build(s, log) for s in spec[1])


def run(spec: Spec, mode: str, worker: aio.HostStream) -> tuple[Any, list[int]]:
    log: list[int] = []
    op = build(spec, log)
    if mode == "sync":
        out = op.sync()
    elif mode == "worker":
        out = op.sync_on(worker)
    elif mode == "await":

        async def main() -> Any:
            return await op.schedule(aio.SingleStream(worker))

        out = asyncio.run(main())
    else:
        graph = op.graph(aio.HostStream())
        assert log == []  # capture records, it does not run
        out = graph.launch().sync_on(worker)
        graph.close()
    return out, log


@settings(max_examples=60, deadline=None)
@given(specs)
def test_every_mode_matches_the_model(spec: Spec) -> None:
    expected = model(spec)
    worker = aio.HostStream(worker=True)
    try:
        with aio.use_device("host"):
            for mode in ("sync", "worker", "await", "graph"):
                assert run(spec, mode, worker) == expected, mode
    finally:
        worker.close()
