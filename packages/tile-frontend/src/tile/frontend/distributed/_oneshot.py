"""The one-shot path of small all-reduces: torch's symmetric-memory all-reduce instead of NCCL's.

A decode step of a tensor-parallel model all-reduces a few kilobytes twice per layer; there NCCL's fixed cost per
collective, not bandwidth, sets the time. torch's symmetric memory (``torch.distributed._symmetric_memory``) has a
one-shot all-reduce for that case: one kernel copies this rank's tensor into a buffer every rank of the group maps
(peer-to-peer over NVLink, no multicast), meets the other ranks at a barrier of signal pads, sums every rank's
buffer into the output and meets them again, so the buffer is free for the next call when the kernel ends. It is
still torch's code on torch's group, no communication layer of Tile's own; NCCL stays the path of everything else.

`enable` (collective: every rank calls it, in the same order as its other collectives) allocates and maps one buffer
of ``max_bytes`` per process; from then on `reason_not` decides per call: a sum of a bf16 or f32 tensor of at most
``max_bytes``, 16-byte aligned in address and size, on an NCCL group of 2, 4 or 8 ranks takes the one-shot path,
anything else NCCL's. The op it replaces keeps its ownership rules (it is the same `Collective`); only its body
differs.

The buffer is one per process, as NCCL's communicator is: one-shot all-reduces must not overlap each other on
different streams, the rule NCCL's collectives of one group already have (they must run in the same order on every
rank, one at a time).
"""

from __future__ import annotations

from typing import Any

from tile.frontend._errors import ArgumentError, BackendError

__all__ = ["ONE_SHOT_DTYPES", "ONE_SHOT_WORLDS", "OneShot", "enable", "reason_not"]

ONE_SHOT_DTYPES = ("bf16", "f32")
"""Element types torch's one-shot kernel reduces."""
ONE_SHOT_WORLDS = (2, 4, 8)
"""Group sizes it has specialised kernels for (others run a generic loop; NCCL serves them better)."""
ALIGN = 16  # the kernel's vector width in bytes: address and size must be multiples of it


class OneShot:
    """The process's symmetric buffer (a torch uint8 tensor of ``capacity`` bytes, mapped by every rank)."""

    __slots__ = ("buffer", "capacity", "group_name", "op")

    def __init__(self, buffer: Any, capacity: int, group_name: str, op: Any) -> None:
        self.buffer, self.capacity, self.group_name, self.op = buffer, capacity, group_name, op

    def body(self, torch: Any, view: Any) -> None:
        """Sum ``view`` (a torch tensor on this rank's GPU) across the group, in place, on torch's current stream."""
        staged = self.buffer[: view.numel() * view.element_size()].view(view.dtype).view(view.shape)
        self.op(staged, view, "sum", self.group_name, view)  # copy in, barrier, sum of every rank's copy into view


def reason_not(
    state: OneShot | None, *, backend: str, world: int, op: str, dtype: str, address: int, offset: int, nbytes: int
) -> str | None:
    """Why an all-reduce of these properties goes to NCCL rather than the one-shot path (``None``: it takes it).

    ``address``: the tensor's first byte; ``offset``: its distance from the start of its memory (torch checks the
    alignment of that one, the kernel's vector loads the address)."""
    if state is None:
        return "the one-shot path is not enabled (tile.distributed.enable_one_shot)"
    rules = (  # (fails, why): the first that fails says why
        (backend != "nccl", f"the group runs on {backend}, not NCCL"),
        (
            world not in ONE_SHOT_WORLDS,
            f"{world} ranks (the one-shot kernels serve {', '.join(map(str, ONE_SHOT_WORLDS))})",
        ),
        (op != "sum", f"the reduction is {op!r} (one-shot sums only)"),
        (dtype not in ONE_SHOT_DTYPES, f"the tensor is {dtype} (one-shot reduces {', '.join(ONE_SHOT_DTYPES)})"),
        (nbytes == 0, "the tensor is empty"),
        (nbytes > state.capacity, f"the tensor has {nbytes} bytes, more than the one-shot buffer's {state.capacity}"),
        (
            bool(address % ALIGN or offset % ALIGN or nbytes % ALIGN),
            f"the tensor's address or size is not a multiple of {ALIGN} bytes",
        ),
    )
    return next((why for fails, why in rules if fails), None)


def enable(torch: Any, backend: str, world: int, max_bytes: int, device: Any) -> OneShot:
    """Allocate and map the one-shot buffer of ``max_bytes`` on every rank (a collective call); `BackendError` when
    this torch or these GPUs cannot (no symmetric memory, no peer access), `ArgumentError` for a bad size.

    The buffer goes on ``device`` (a ``tile.core.Device``: the group's GPU, where its tensors live), never on torch's
    current device, which the caller may have switched since `init` (the one-shot kernel would then stage this
    rank's tensor in another GPU's memory)."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < ALIGN:
        raise ArgumentError(f"enable_one_shot: max_bytes must be an int of at least {ALIGN}, got {max_bytes!r}")
    if backend != "nccl":
        raise BackendError(f"the one-shot all-reduce needs GPUs and NCCL's group; this group runs on {backend}")
    if world not in ONE_SHOT_WORLDS:
        raise BackendError(
            f"the one-shot all-reduce serves groups of {', '.join(map(str, ONE_SHOT_WORLDS))} ranks, not {world}"
        )
    capacity = -(-max_bytes // ALIGN) * ALIGN
    try:
        import torch.distributed._symmetric_memory as symm

        op = torch.ops.symm_mem.one_shot_all_reduce_copy_out
        group_name = torch.distributed.group.WORLD.group_name
        if hasattr(symm, "enable_symm_mem_for_group"):  # needed before rendezvous by older torch, a no-op after
            symm.enable_symm_mem_for_group(group_name)
        buffer = symm.empty(capacity, dtype=torch.uint8, device=torch.device("cuda", device.ordinal))
        symm.rendezvous(buffer, group_name)
    except (ImportError, AttributeError, RuntimeError) as exc:
        raise BackendError(
            f"torch's symmetric memory is not usable here ({type(exc).__name__}: {exc}); all-reduces stay on NCCL"
        ) from None
    return OneShot(buffer, capacity, group_name, op)
