"""`Lent`: a tensor lent to another library for writing, through DLPack (the explicit writable export).

``tensor.__dlpack__`` always exports read-only: a consumer's view outlives the call, and the tensor may later be a
kernel's input, which another library must not write mid-kernel. To let another library write (an NCCL all-reduce
through torch, a cupy fill), lend the tensor: ``lent = z.lend()`` needs exclusive memory (as a partition does) and
moves the tensor, so while it is lent no Tile handle can read, launch, view or free that memory. The consumer's
arrays are tracked like every export; ``lent.reclaim()`` gives the tensor back once they are all gone.

Invariants: a `Lent` is move-only and uncopyable; it exports only while it is not reclaimed; ``reclaim`` raises
`BorrowError` (and changes nothing) while any array made from it is alive.
"""

from __future__ import annotations

from typing import Any

from tile.frontend._errors import BorrowError, Exact, FinalClassError, final_class_error, refuse_subclass
from tile.frontend._handle import Wrapper
from tile.frontend._partition import require_exclusive
from tile.frontend._site import user_site
from tile.frontend._storage import HOST, _Export, owning
from tile.frontend._tensor import Tensor

__all__ = ["Lent", "lend"]


class Lent(Wrapper, metaclass=Exact):
    """A tensor lent for writing to another library; make one with ``tensor.lend()``.

    Pass it to the other library's ``from_dlpack`` (``torch.from_dlpack(lent)``, ``np.from_dlpack(lent)``): those
    arrays are writable views of the tensor's memory. Call `reclaim` once they are gone to get the tensor back.
    """

    __slots__ = ("_tokens",)
    _tokens: list[_Export]

    @classmethod
    def subclass_error(cls, qualname: str) -> FinalClassError:
        """The error the `Exact` metaclass raises for defining ``qualname``, a subclass of this class."""
        return final_class_error(cls, qualname)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise refuse_subclass(cls)  # launches trust this class's methods: see FinalClassError

    _copy_fix = "pass the Lent itself to the other library's from_dlpack, as many times as you need"

    def __init__(self) -> None:
        raise TypeError("lend a tensor with tensor.lend()")

    def _describe(self) -> str:
        return f"Lent({self._tensor.dtype.name}, {list(self._tensor.shape)}) created at {self._tensor._site}"

    @property
    def consumers(self) -> int:
        """How many arrays made from this loan are still alive."""
        exports = self._tensor._storage._exports
        return sum(1 for token in self._tokens if token in exports)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._check().__dlpack_device__()

    @owning
    def __dlpack__(self, *, stream: Any = None, **kwargs: Any) -> Any:
        """A writable DLPack export; the consumer's array is tracked until it is collected."""
        tensor = self._check()
        storage = tensor._storage
        if storage.host is not None:
            view: Any = tensor._elements()
            capsule = view.__dlpack__(**kwargs)
        else:
            from tile.frontend import _device

            view = _device.view(tensor, export=True, writable=True)
            capsule = view.__dlpack__(stream=stream, **kwargs)
        self._tokens.append(
            storage.export(*tensor._byte_range(), f"a writable DLPack export of {self._describe()}", view)
        )
        return capsule

    @owning
    def reclaim(self) -> Tensor:
        """Give the tensor back once no array made from this loan is alive (moves this handle).

        Raises
        ------
        BorrowError
            While another library still holds an array made from it: drop it (``del arr``) first.
        """
        tensor = self._check()
        site = user_site()
        if self.consumers:
            raise BorrowError(
                f"cannot reclaim {self._describe()} at {site}: {self.consumers} array(s) made from it by another "
                "library are still alive and may write it; drop them first (`del arr`)"
            )
        tensor._storage.settle()  # the other library's queued writes are done before Tile uses the memory again
        tensor._storage.unhold(tensor)
        self._fate = ("reclaim", f"reclaimed at {site}")
        return tensor._move("reclaim", f"reclaimed at {site}")

    def __repr__(self) -> str:
        state = "reclaimed" if self._fate is not None else f"{self.consumers} consumer(s)"
        where = "cpu" if self._tensor._storage.device == HOST else str(self._tensor._storage.device)
        return f"Lent({self.dtype.name}, {list(self.shape)}, {where}, {state})"


def lend(tensor: Tensor, site: str) -> Lent:
    """Move ``tensor`` into a new `Lent` (see `Tensor.lend`)."""
    require_exclusive(tensor, f"lend {tensor._describe()} (at {site})", "lend")
    self = object.__new__(Lent)
    self._tensor, self._fate, self._tokens = tensor._move("partition", f"moved into .lend() at {site}"), None, []
    self._tensor._storage.hold(self._tensor, f"{self._describe()} made at {site}")
    return self
