"""`Shared`: a read-only tensor that any number of launches may use at once (cuTile Rust's ``Arc<Tensor>`` input).

Invariants: ``tensor.share()`` moves the tensor into the share; the share is a live borrow of its memory for as
long as it exists (no partition may overlap it), it can only be passed to read-only ``Tensor`` parameters, and a
launch does not move it but counts itself as a user until its work is done. ``unshare()`` gives the tensor back only
when no launch uses it any more (otherwise `BorrowError`), so a writer can never race a pending reader.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tile.frontend._errors import BorrowError, Exact, FinalClassError, final_class_error, frozen, refuse_subclass
from tile.frontend._handle import Wrapper
from tile.frontend._partition import Partition
from tile.frontend._site import user_site
from tile.frontend._storage import owning
from tile.frontend._tensor import Tensor

__all__ = ["HANDLES", "Shared", "share", "tensor_of"]


class Shared(Wrapper, metaclass=Exact):
    """A tensor shared read-only between launches; make one with ``tensor.share()``.

    Its attributes are read-only.
    """

    __slots__ = ("_permanent", "_users")
    _users: int
    _permanent: bool

    @classmethod
    def subclass_error(cls, qualname: str) -> FinalClassError:
        """The error the `Exact` metaclass raises for defining ``qualname``, a subclass of this class."""
        return final_class_error(cls, qualname)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise refuse_subclass(cls)  # launches trust this class's methods: see FinalClassError

    def __init__(self) -> None:
        raise TypeError("share a tensor with tensor.share()")

    _copy_fix = (
        "pass the share itself to as many launches as you like; copy.deepcopy makes a new share of copied values"
    )

    def __deepcopy__(self, memo: dict[int, Any]) -> Shared:
        """A share of a new tensor holding a copy of the elements."""
        return self._check().copy().share()

    def _describe(self) -> str:
        return f"Shared({self._tensor.dtype.name}, {list(self._tensor.shape)}) created at {self._tensor._site}"

    @property
    def users(self) -> int:
        """Launches holding it whose work is not done yet (read-only)."""
        return self._users

    @users.setter
    def users(self, value: object) -> None:
        raise frozen(self, "users", "sync or await the launches holding it; unshare() then gives the tensor back")

    @property
    def moved(self) -> bool:
        """True once unshared."""
        return self._fate is not None or self._tensor.moved

    def to_numpy(self) -> np.ndarray[Any, Any]:
        """Copy the elements to a new numpy array (reading is always allowed)."""
        return self._check().to_numpy()

    @owning
    def unshare(self) -> Tensor:
        """Return the tensor once no launch uses the share any more.

        Raises
        ------
        BorrowError
            While launches holding it are pending: ``.sync()`` / ``await`` them first; always for a permanent share
            (``tensor.share(permanent=True)``).
        """
        tensor = self._check()
        site = user_site()
        if self._permanent:
            raise BorrowError(
                f"cannot unshare {self._describe()} at {site}: it was shared for good (`.share(permanent=True)`) by "
                "the code that made it, which passes it to other calls; read it (to_numpy()), or copy.deepcopy it for "
                "a share of your own"
            )
        if self._users:
            raise BorrowError(
                f"cannot unshare {self._describe()} at {site}: {self.users} launch(es) holding it are not done; "
                "sync or await them first"
            )
        self._fate = ("unshare", f"unshared at {site}")
        return tensor._move("unshare", f"unshared at {site}")

    def __repr__(self) -> str:
        state = "unshared" if self.moved else f"{self.users} pending users"
        return f"Shared({self.dtype.name}, {list(self.shape)}, {state})"


def share(tensor: Tensor, site: str, permanent: bool = False) -> Shared:
    """Move ``tensor`` into a new `Shared` (see `Tensor.share`)."""
    inner = tensor._move("partition", f"moved into .share() at {site}")
    self = object.__new__(Shared)
    self._tensor, self._fate, self._users, self._permanent = inner, None, 0, permanent
    return self


HANDLES = (Tensor, Partition, Shared)
"""Every argument kind that refers to memory."""


def tensor_of(value: Tensor | Partition | Shared) -> Tensor:
    """The tensor handle behind any memory argument."""
    return value if isinstance(value, Tensor) else value._tensor
