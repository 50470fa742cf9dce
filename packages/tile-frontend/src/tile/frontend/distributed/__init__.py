"""``tile.distributed``: collectives on Tile tensors through ``torch.distributed`` (NCCL on GPUs, gloo on the host).

Tile has no communication layer of its own: it runs on the one users already have. One process per GPU, started by
``torchrun --nproc-per-node N``; `init` joins the process group (NCCL for GPU tensors, gloo for host tensors of the
CPU backend) and picks this process's device. The collectives are ``tile.aio`` ops that compose with launches
(``.then``, ``await``, graph capture where NCCL allows it) under the launch rules: a tensor a collective writes
needs exclusive memory, as a partition does, and is moved into it; tensors it only reads are moved too, or passed as
`Shared` borrows; everything comes back once the collective's stream work is done.

Why a subpackage of tile.frontend and not its own package: a collective is a launch in all but its body, so it
needs the frontend's handle internals (moves, in-flight fates, pending counts, the exclusivity check) that are not
public API; torch is imported only here, on first use, so nothing else in Tile needs it.

``init`` sets ``NCCL_NVLS_ENABLE=0`` and ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` in this process's environment unless
they are already set (NVLink multicast needs fabric setup the lent machines do not have, and the one-shot path of
`enable_one_shot` does not use it; set them for processes you start yourself too).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import tile.aio
from tile.frontend._errors import ArgumentError, BackendError
from tile.frontend._partition import Partition
from tile.frontend._shared import Shared, tensor_of
from tile.frontend._site import user_site
from tile.frontend._storage import HOST
from tile.frontend._tensor import Tensor
from tile.frontend.distributed import _oneshot
from tile.frontend.distributed._collective import Collective, collective, torch_dtype

__all__ = [
    "Collective",
    "Group",
    "all_gather",
    "all_reduce",
    "barrier",
    "broadcast",
    "destroy",
    "disable_one_shot",
    "enable_one_shot",
    "group",
    "init",
    "one_shot_reason",
    "reduce_scatter",
]

_OPS = ("sum", "prod", "min", "max", "avg")


@dataclass(frozen=True)
class Group:
    """This process's place in the process group: ``rank`` of ``world_size``, its ``device`` and ``backend``."""

    rank: int
    world_size: int
    device: object
    backend: str


class _State:
    group: Group | None = None
    torch: Any = None  # the torch module, once imported (every collective asks for it)
    one_shot: _oneshot.OneShot | None = None  # the small all-reduces' symmetric buffer, once enabled


def _torch() -> Any:
    if _State.torch is not None:
        return _State.torch
    try:
        import torch
        import torch.distributed
    except ImportError as exc:
        raise BackendError(
            f"tile.distributed runs on torch.distributed, which is not installed ({exc}): pip install torch"
        ) from None
    _State.torch = torch
    return torch


def init(
    backend: str | None = None,
    *,
    device: object = None,
    init_method: str | None = None,
    rank: int | None = None,
    world_size: int | None = None,
) -> Group:
    """Join the process group (once per process) and return this process's `Group`.

    Parameters
    ----------
    backend
        ``"nccl"`` (GPU tensors) or ``"gloo"`` (host tensors, the CPU backend); by default NCCL when Tile's backend
        is the GPU, else gloo.
    device
        This process's GPU for NCCL (default: ``LOCAL_RANK``, as torchrun sets it); gloo uses the host. With NCCL it
        becomes the process's default device (``tile.aio.set_default_device(..., process=True)``): tensors made
        without ``device=`` and ops run without a context go there, so one script serves every rank. Choose the
        backend (``tile.set_backend``) before ``init``: switching it resets the default to GPU 0.
    init_method, rank, world_size
        Passed to ``torch.distributed.init_process_group`` (default: torchrun's environment, ``env://``).

    Raises
    ------
    BackendError
        Without torch, for an unknown backend, or when the group is already initialised with another backend.
    ArgumentError
        For NCCL with a ``device`` (or ``LOCAL_RANK``) that names no GPU (``"cpu"``, a negative ordinal, junk).
    """
    from tile.frontend._backend import backend as tile_backend
    from tile.frontend._placement import resolve

    torch = _torch()
    dist = torch.distributed
    chosen = backend or ("nccl" if tile_backend() == "gpu" else "gloo")
    if chosen not in ("nccl", "gloo"):
        raise BackendError(f"tile.distributed runs on 'nccl' (GPU tensors) or 'gloo' (host tensors), not {chosen!r}")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")  # (read when symmetric memory is first mapped)
    where = (
        HOST
        if chosen == "gloo"
        else resolve(device if device is not None else _local_rank(os.environ.get("LOCAL_RANK")))
    )
    if chosen == "nccl" and where == HOST:
        raise ArgumentError(f"init: NCCL runs on a GPU, not on {device!r}; pass a GPU ordinal, or use 'gloo'")
    if chosen == "nccl":
        torch.cuda.set_device(where.ordinal)  # type: ignore[attr-defined]  # a tile.core.Device
        tile.aio.set_default_device(where, process=True)  # new tensors and ops of this process go to its GPU
    if not dist.is_initialized():
        extra: dict[str, Any] = {k: v for k, v in (("rank", rank), ("world_size", world_size)) if v is not None}
        dist.init_process_group(backend=chosen, init_method=init_method, **extra)
    elif str(dist.get_backend()) != chosen:
        raise BackendError(f"torch.distributed is already initialised with {dist.get_backend()!r}, not {chosen!r}")
    _State.group = Group(dist.get_rank(), dist.get_world_size(), where, chosen)
    return _State.group


def _local_rank(value: str | None) -> object:
    """torchrun's ``LOCAL_RANK`` as a GPU ordinal (unset: 0); anything but digits is left for `resolve` to refuse."""
    if value is None:
        return 0
    return int(value) if value.isascii() and value.isdigit() else f"LOCAL_RANK={value!r}"


def group() -> Group:
    """This process's `Group` (`BackendError` before `init`)."""
    if _State.group is None:
        raise BackendError("tile.distributed is not initialised: call tile.distributed.init() first")
    return _State.group


def destroy() -> None:
    """Leave the process group (``torch.distributed.destroy_process_group``).

    With NCCL it first waits for this process's GPU: NCCL's communicators (and the one-shot buffer) must not go while
    a collective still runs on them (a graph replayed and not waited for, a ``.then`` chain still queued)."""
    if _State.group is not None:
        torch = _torch()
        if _State.group.backend == "nccl":
            torch.cuda.synchronize(_State.group.device.ordinal)  # type: ignore[attr-defined]  # a tile.core.Device
        _State.one_shot = None  # (torch frees the buffer with the group)
        torch.distributed.destroy_process_group()
        if _State.group.backend == "nccl":
            tile.aio.set_default_device("cuda", process=True)  # back to the GPU backend's default, GPU 0
        _State.group = None


def barrier() -> None:
    """Block until every process reaches this call."""
    group()
    _torch().distributed.barrier()


def enable_one_shot(max_bytes: int = 1 << 16, *, unchecked: bool = False) -> None:
    """Send sums of up to ``max_bytes`` through torch's symmetric-memory one-shot all-reduce instead of NCCL.

    A collective call: every rank calls it, after `init`, in the same order as its other collectives (it allocates
    one buffer of ``max_bytes`` per GPU that every rank maps). Afterwards `all_reduce` takes the one-shot path for a
    ``"sum"`` of a bf16 or f32 tensor of at most ``max_bytes``, 16-byte aligned in address and size, on 2, 4 or 8
    ranks (`one_shot_reason` says why a call does not), and NCCL for the rest; results and ownership are the same.
    For the small all-reduces of a tensor-parallel decode step (a few KB each) the one-shot kernel, one launch that
    reads every rank's copy over NVLink, costs less than NCCL's collective. It needs peer access between the GPUs,
    not NVLink multicast. Calling it again replaces the buffer (collectively too).

    **Unchecked** (``unchecked=True`` is required): every one-shot all-reduce of the process stages through the one
    buffer, so two of them running at once (on two streams, or a replayed graph holding them beside another stream's)
    would race on it and sum the wrong data. Tile cannot see every such overlap (a graph's replays run outside its
    ops), so the caller promises it: this process's collectives run one at a time, in the same order on every rank,
    the rule NCCL's collectives of one group have too (a tensor-parallel decode step on one stream keeps it).

    Raises
    ------
    ArgumentError
        Without ``unchecked=True`` (nothing changes: all-reduces stay on NCCL), or for a ``max_bytes`` under 16.
    BackendError
        Before `init`, on gloo, for another rank count, or when torch's symmetric memory is unusable here (nothing
        changes then: all-reduces stay on NCCL).
    """
    if unchecked is not True:
        raise ArgumentError(
            "enable_one_shot: the one-shot buffer is shared by every all-reduce of this process and Tile cannot check "
            "that they never overlap; pass unchecked=True to promise the collectives run one at a time (one stream)"
        )
    g, torch = group(), _torch()
    device = g.device if g.backend == "nccl" else None  # the group's GPU, whatever torch's current device is now
    _State.one_shot = _oneshot.enable(torch, g.backend, g.world_size, max_bytes, device)


def disable_one_shot() -> None:
    """All-reduces go through NCCL again (every rank must call it at the same point of its collectives)."""
    _State.one_shot = None


def one_shot_reason(tensor: Any, op: str = "sum") -> str | None:
    """Why `all_reduce(tensor, op)` would run on NCCL rather than the one-shot path; ``None`` when it takes it."""
    g = group()
    t = _tensor("one_shot_reason", tensor, _torch())
    lo, hi = t._byte_range()
    return _oneshot.reason_not(
        _State.one_shot,
        backend=g.backend,
        world=g.world_size,
        op=op,
        dtype=t.dtype.name,
        address=lo,
        offset=lo - t._storage.address,
        nbytes=hi - lo,
    )


def _reduce_op(torch: Any, op: str, g: Group) -> Any:
    if op not in _OPS or (op == "avg" and g.backend != "nccl"):
        allowed = _OPS if g.backend == "nccl" else _OPS[:4]
        raise ArgumentError(f"unknown reduction {op!r} for {g.backend}: use one of {', '.join(allowed)}")
    return getattr(torch.distributed.ReduceOp, _TORCH_OPS.get(op, op.upper()))


_TORCH_OPS = {"prod": "PRODUCT"}  # torch's name where it is not the upper-cased one


def _tensor(name: str, h: object, torch: Any) -> Tensor:
    """The tensor behind a handle argument (checked further when the op is built), of a dtype torch carries."""
    if not isinstance(h, (Tensor, Partition, Shared)):
        raise ArgumentError(f"{name} takes Tile tensors (or shares, to read); got {type(h).__name__}")
    t = tensor_of(h)
    torch_dtype(torch, t.dtype.name)
    return t


def _same(name: str, out: Tensor, inp: Tensor, shape: tuple[int, ...]) -> None:
    if out.dtype != inp.dtype:
        raise ArgumentError(f"{name}: the output is {out.dtype.name} but the input {inp.dtype.name}; they must match")
    if out.shape != shape:
        raise ArgumentError(
            f"{name}: the output must have shape {list(shape)} for an input of shape {list(inp.shape)}, "
            f"not {list(out.shape)}"
        )


def all_reduce(tensor: Any, op: str = "sum") -> Collective:
    """Reduce ``tensor`` across all processes, in place (every process gets the result); moves ``tensor``.

    The op's output is the tensor, handed back once the reduction is done. ``op``: ``"sum"``, ``"prod"``,
    ``"min"``, ``"max"`` (and ``"avg"`` with NCCL). Small sums take torch's one-shot all-reduce once
    `enable_one_shot` was called (`one_shot_reason`), the rest NCCL (or gloo).
    """
    torch, g, site = _torch(), group(), user_site()
    dist, reduce = torch.distributed, _reduce_op(torch, op, g)
    _tensor("all_reduce", tensor, torch)
    fast = _State.one_shot
    if fast is not None and one_shot_reason(tensor, op) is None:

        def one_shot(views: list[Any]) -> None:
            fast.body(torch, views[0])

        return collective("all_reduce", [tensor], [], one_shot, torch=torch, device=g.device, site=site)

    def body(views: list[Any]) -> None:
        dist.all_reduce(views[0], op=reduce)

    return collective("all_reduce", [tensor], [], body, torch=torch, device=g.device, site=site)


def broadcast(tensor: Any, src: int = 0) -> Collective:
    """Copy rank ``src``'s ``tensor`` into every other process's, in place; moves ``tensor`` (on every rank)."""
    if isinstance(src, bool) or not isinstance(src, int):  # True or 0.0 would pass the range check below
        raise ArgumentError(f"broadcast: src must be a rank (an int), got {type(src).__name__} {src!r}")
    src = int(src)  # an int subclass's value, read once
    torch, g, site = _torch(), group(), user_site()
    if not 0 <= src < g.world_size:
        raise ArgumentError(f"broadcast: src={src} is not a rank of this group (0 to {g.world_size - 1})")
    _tensor("broadcast", tensor, torch)
    dist = torch.distributed

    def body(views: list[Any]) -> None:
        dist.broadcast(views[0], src=src)

    return collective("broadcast", [tensor], [], body, torch=torch, device=g.device, site=site)


def all_gather(out: Any, inp: Any) -> Collective:
    """Concatenate every process's ``inp`` along axis 0 into ``out`` (``[world_size * n, ...]`` for ``[n, ...]``).

    ``out`` is written (exclusive, moved); ``inp`` is read (moved, or a `Shared`). The output is ``(out, inp)``.
    """
    torch, g, site = _torch(), group(), user_site()
    o, i = _tensor("all_gather", out, torch), _tensor("all_gather", inp, torch)
    if not i.ndim:
        raise ArgumentError("all_gather: the input needs at least one axis (gather a [1] tensor for a scalar)")
    _same("all_gather", o, i, (g.world_size * i.shape[0], *i.shape[1:]))
    dist, world = torch.distributed, g.world_size

    def body(views: list[Any]) -> None:
        whole, part = views
        if g.backend == "nccl":
            dist.all_gather_into_tensor(whole, part)
        else:  # gloo: gather into the output's row blocks (views of it)
            dist.all_gather(list(whole.reshape(world, *part.shape).unbind(0)), part)

    return collective("all_gather", [out], [inp], body, torch=torch, device=g.device, site=site)


def reduce_scatter(out: Any, inp: Any, op: str = "sum") -> Collective:
    """Reduce every process's ``inp`` (``[world_size * n, ...]``) and give rank ``r`` its ``r``-th block of ``n`` rows
    in ``out``. ``out`` is written (exclusive, moved); ``inp`` is read. The output is ``(out, inp)``."""
    torch, g, site = _torch(), group(), user_site()
    reduce = _reduce_op(torch, op, g)
    o, i = _tensor("reduce_scatter", out, torch), _tensor("reduce_scatter", inp, torch)
    if not i.ndim or i.shape[0] % g.world_size:
        raise ArgumentError(
            f"reduce_scatter: the input's first extent ({i.shape[0] if i.ndim else 'none'}) must be a multiple of the "
            f"world size {g.world_size}"
        )
    _same("reduce_scatter", o, i, (i.shape[0] // g.world_size, *i.shape[1:]))
    dist, rank, world = torch.distributed, g.rank, g.world_size

    def body(views: list[Any]) -> None:
        block, whole = views
        if g.backend == "nccl":
            dist.reduce_scatter_tensor(block, whole, op=reduce)
        else:  # gloo has no reduce-scatter: reduce a copy everywhere, keep this rank's block
            total = whole.clone()
            dist.all_reduce(total, op=reduce)
            block.copy_(total.reshape(world, *block.shape)[rank])

    return collective("reduce_scatter", [out], [inp], body, torch=torch, device=g.device, site=site)
