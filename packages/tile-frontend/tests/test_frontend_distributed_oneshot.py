"""The one-shot all-reduce path of ``tile.distributed`` on the CPU: which calls take it (`one_shot_reason`), what
`enable_one_shot` refuses, and that `all_reduce` runs the one-shot body (a recording stand-in for torch's kernel,
which needs GPUs) on the staged buffer for the calls that take it and NCCL's for the rest. The numerics on two GPUs
are in ``test_frontend_multi_gpu.py`` (``helpers_distributed.py nccl-one-shot``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
import tile.frontend.distributed as d
from tile.frontend import bf16, f32, i32
from tile.frontend._storage import HOST
from tile.frontend.distributed import _oneshot

torch = pytest.importorskip("torch")
CAP = 1024


def _reason(**kw: Any) -> str | None:
    props: dict[str, Any] = {"backend": "nccl", "world": 2, "op": "sum", "dtype": "bf16", "address": 4096}
    props |= {"offset": 0, "nbytes": 512, **kw}
    state = props.pop("state", _oneshot.OneShot(None, CAP, "g", None))
    return _oneshot.reason_not(state, **props)


def test_small_aligned_sums_take_the_one_shot_path() -> None:
    assert _reason() is None
    assert _reason(dtype="f32", world=8, nbytes=CAP) is None


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"state": None}, "not enabled"),
        ({"backend": "gloo"}, "runs on gloo"),
        ({"world": 3}, "3 ranks"),
        ({"op": "max"}, "'max'"),
        ({"dtype": "f16"}, "f16"),
        ({"nbytes": 0}, "empty"),
        ({"nbytes": CAP + 16}, "more than the one-shot buffer"),
        ({"address": 4104}, "multiple of 16"),
        ({"offset": 8}, "multiple of 16"),
        ({"nbytes": 520}, "multiple of 16"),
    ],
)
def test_everything_else_goes_to_nccl(change: dict[str, Any], why: str) -> None:
    reason = _reason(**change)
    assert reason is not None
    assert why in reason


class _Recorder:
    """Stands in for ``torch.ops.symm_mem.one_shot_all_reduce_copy_out`` on a 2-rank group whose other rank holds
    the same values: it checks the staging buffer is the op's input's shape and dtype, copies in, writes 2x."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, staged: Any, local: Any, op: str, group_name: str, out: Any) -> Any:
        assert (op, group_name) == ("sum", "world")
        assert out is local
        assert (staged.shape, staged.dtype) == (local.shape, local.dtype)
        staged.copy_(local)
        self.calls += 1
        return out.copy_(staged * 2)


@pytest.fixture
def fake_two_rank_nccl(tmp_path: Any) -> Iterator[_Recorder]:
    """A one-process gloo group that `all_reduce` sees as 2 NCCL ranks on the host, with the one-shot path enabled
    through the recorder (the collective body runs as host work, as gloo's does)."""
    d.init("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    real = d._State.group
    recorder = _Recorder()
    d._State.group = d.Group(0, 2, HOST, "nccl")
    d._State.one_shot = _oneshot.OneShot(torch.zeros(CAP, dtype=torch.uint8), CAP, "world", recorder)
    yield recorder
    d._State.group = real
    d.destroy()


def test_all_reduce_runs_the_one_shot_body_for_the_calls_that_take_it(fake_two_rank_nccl: _Recorder) -> None:
    x = tile.from_numpy(np.arange(64, dtype=np.float32) - 5, dtype=bf16)
    assert d.one_shot_reason(x) is None
    out = d.all_reduce(x).sync()
    np.testing.assert_array_equal(out.to_numpy().astype(np.float32), 2 * (np.arange(64, dtype=np.float32) - 5))
    assert fake_two_rank_nccl.calls == 1
    # A chain in one graph-like .then() sequence: each call stages again.
    twice = d.all_reduce(tile.ones(f32, [8, 4])).then(d.all_reduce).sync()
    np.testing.assert_array_equal(twice.to_numpy(), np.full((8, 4), 4, np.float32))
    assert fake_two_rank_nccl.calls == 3


def test_calls_the_one_shot_path_does_not_serve_keep_the_nccl_body(fake_two_rank_nccl: _Recorder) -> None:
    big = tile.ones(f32, [CAP // 4 + 4])
    assert "more than" in (d.one_shot_reason(big) or "")
    ints = tile.ones(i32, [16])
    assert "i32" in (d.one_shot_reason(ints) or "")
    assert "'max'" in (d.one_shot_reason(tile.ones(f32, [16]), "max") or "")
    # (the NCCL body would run torch's gloo all-reduce on a world of 1 here: the values come back unchanged)
    np.testing.assert_array_equal(d.all_reduce(big).sync().to_numpy(), np.ones(CAP // 4 + 4, np.float32))
    np.testing.assert_array_equal(d.all_reduce(tile.ones(f32, [16]), op="max").sync().to_numpy(), np.ones(16))
    assert fake_two_rank_nccl.calls == 0


def test_enable_refuses_gloo_and_bad_sizes(tmp_path: Any) -> None:
    with pytest.raises(tile.BackendError, match="not initialised"):
        d.enable_one_shot(unchecked=True)
    d.init("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        with pytest.raises(tile.BackendError, match="needs GPUs and NCCL"):
            d.enable_one_shot(unchecked=True)
        for bad in (0, 8, 1.5, True):
            with pytest.raises(tile.ArgumentError, match="max_bytes"):
                d.enable_one_shot(bad, unchecked=True)  # type: ignore[arg-type]  # (what the check is for)
        assert d._State.one_shot is None
        assert "not enabled" in (d.one_shot_reason(tile.ones(f32, [4])) or "")
    finally:
        d.destroy()


@pytest.mark.parametrize("flag", [False, 1, "yes"])
def test_enable_needs_unchecked_true_because_overlapping_sums_would_share_the_buffer(flag: Any) -> None:
    """Two one-shot sums at once (two streams, a replayed graph beside another stream) race on the one staging
    buffer, which Tile cannot see: only ``unchecked=True`` (the caller's promise) turns the path on; before `init`."""
    with pytest.raises(tile.ArgumentError, match=r"pass unchecked=True to promise the collectives run one at a time"):
        d.enable_one_shot(unchecked=flag)
    assert d._State.one_shot is None


def test_enable_refuses_rank_counts_without_kernels() -> None:
    with pytest.raises(tile.BackendError, match="not 3"):
        _oneshot.enable(torch, "nccl", 3, 1024, None)
