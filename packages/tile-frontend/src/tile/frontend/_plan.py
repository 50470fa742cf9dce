"""Launch plans: what a kernel call with a known argument layout needs, computed once and reused per launch.

A call's checks (kinds, dtypes, ranks, static extents, generic inference, the grid, devices) and its compiled kernel
depend only on the argument *layout*: each handle's class, dtype, extents, strides, base alignment class and device
(``Tensor._layout``, fixed per handle), which arguments are the same object, the scalar classes, the ``Const`` values
and the keyword generics. `layout_key` builds that key cheaply (no `Specialization`, no compiler call); a `Plan`
stored under it holds the compiled kernel, the grid and the entry-ABI packing with extents and strides resolved.

Invariants: a plan is stored only after the full checks of a call passed, so a hit proves every static check again.
`layout_key` (handle states: moved, freed) and `Plan.try_launch` (scalar values, byte-range aliasing between the
arguments and with every other live handle) re-check everything that can change between calls with the same layout,
and on any anomaly return None, so the caller runs the full path, which raises the precise error. The fast path
therefore accepts exactly the calls the full path accepts and never raises an ownership error itself.

A handle in flight (handed to a ``.then()`` function before its launch was done, `InFlight`) counts as live here:
a kernel call may take it, and `Plan.hand_over` reports it so the launch is ordered after the one that lent it.

A plan is made only for code whose ABI views each memory argument as what the layout passes (`check_abi`: dtype,
rank, static extents, output tile shape); every launch it admits has that layout, so the check runs once per layout.

`Plan.admit` is the same test for a kernel's most recent plan without building the key: it compares each argument
with the plan's own layout (class, ``_layout``, tile shape, ``Const`` value, scalar class, which handles are the same
object), so it accepts a call only when `layout_key` would give this plan's key and `Plan.try_launch` would pass.
`Plan.hand_over` then moves the arguments (distinct handles only), and `Plan.enqueue` relaunches the last prepared
GPU launch when the stream, grid and packed arguments repeat (so a plan keeps its last stream alive until a launch on
another stream replaces it, as the prepared-launch cache of `_execute` does).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from tile.compiler import CompiledKernel
from tile.compiler.lang import DType
from tile.frontend import _accel
from tile.frontend._abi_check import check_abi
from tile.frontend._errors import IN_FLIGHT, InFlight
from tile.frontend._execute import GPU_KIND, prepared_launch
from tile.frontend._launch import Launch, Taken
from tile.frontend._partition import Partition
from tile.frontend._shared import Shared
from tile.frontend._signature import FLOAT_INT, Param, const_key, int_range, plain_number
from tile.frontend._site import OURS
from tile.frontend._storage import _FOREIGN, OWNERSHIP, Storage, overlapping
from tile.frontend._tensor import Tensor

__all__ = ["Packing", "Plan", "launch_again", "layout_key"]

_HANDLE_CLASSES = (Tensor, Partition, Shared)
# Scalar types whose checks and comparisons run no user code (a subclass may override __int__ or __eq__).
_PLAIN = frozenset(
    {int, float, bool, np.bool_, np.float16, np.float32, np.float64}
    | {np.dtype(f"{k}{b}").type for k in "iu" for b in (1, 2, 4, 8)}
)
_INT_KINDS = frozenset({"i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"})
# (kernel-argument position, mode, call-argument index): per launch `Plan.enqueue` fills the position with the handle's
# base address (_BASE), the scalar as an int (_INT) or the value as is (_RAW).
Slot = tuple[int, int, int]
Packing = tuple[tuple[Any, ...], tuple[Slot, ...], tuple[str, ...]]  # (constants template, slots to fill, kinds)
_BASE, _INT, _RAW = 1, 2, 3


class _NegativeZero(float):
    """``-0.0`` as a packed float argument. Launches are matched by their packed arguments (`Plan.enqueue`,
    ``_fastlaunch.replay``, the prepared-launch cache), and ``-0.0 == 0.0``: packed as itself, a launch with one zero
    would relaunch the launch prepared with the other. Still a float (tile.core packs it as -0.0), it equals only
    itself. Other floats need nothing: equal non-zero values pack into the same bits, and a NaN equals no other
    object (a new prepared launch, in caches that stay bounded)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __hash__(self) -> int:
        return 0x2D30  # any constant: only NEG_ZERO is ever made


NEG_ZERO = _NegativeZero(-0.0)


def _same_sign(a: Any, b: Any) -> bool:
    """False when ``a`` and ``b`` (equal values) are floats of opposite signs: a Const or generic of ``-0.0`` needs
    its own plan (and kernel) though ``-0.0 == 0.0``."""
    return type(a) is not float or type(b) is not float or math.copysign(1.0, a) == math.copysign(1.0, b)


def _raw(v: Any) -> Any:
    """A float scalar as packed: itself, a zero as ``0.0`` or `NEG_ZERO` (a zero of a numpy type would compare equal
    to `NEG_ZERO`, its ``__eq__`` running first)."""
    if v:
        return v
    return NEG_ZERO if math.copysign(1.0, v) < 0 else 0.0


class Caller(Protocol):
    """What `launch_again` reads from the `Kernel` being called."""

    __name__: str
    unchecked: bool

    @property
    def _grid(self) -> object: ...

    def _check_scalar(self, p: Param, value: Any) -> None: ...


def launch_again(plan: Plan, kernel: Caller, args: tuple[Any, ...], generics: dict[str, Any]) -> Launch | None:
    """The launch of a call with ``plan``'s layout that passes every re-check (`Plan.admit`), its handles moved in;
    None when the keyed path must decide."""
    frame = sys._getframe(2)  # `user_frame`, inlined (hot path): Kernel.__call__'s caller is two up
    while frame.f_back is not None and frame.f_code.co_filename.startswith(OURS):
        frame = frame.f_back
    code, lasti = frame.f_code, frame.f_lasti  # f_lineno decodes the line table (us at the end of a long function)
    site = plan.site
    if site[0] is not code or site[4] != lasti:  # a new call site: format its messages once, not per launch
        where = f"{code.co_filename}:{frame.f_lineno}"
        fate = ("launch", f"moved into the launch of {kernel.__name__} at {where}")
        site = plan.site = (code, frame.f_lineno, where, fate, lasti)
    values = plan.admit(args, generics, kernel._grid, kernel._check_scalar, kernel.unchecked)
    if values is None:
        return None
    moved, after = plan.hand_over(values, site[3])
    return Launch(kernel.__name__, plan, moved, site[2], after)


def layout_key(params: Sequence[Param], args: Sequence[Any], generics: dict[str, Any], grid: object) -> Any:
    """The layout of a call (see the module docstring), or None when the call has no handle, too many arguments or a
    handle that is not live (moved, freed: the full path raises the precise error).

    Trailing ``Const`` parameters given as keywords are in ``generics``, so fewer arguments than parameters is fine.
    """
    if len(args) > len(params):
        return None
    parts: list[Any] = [grid, tuple((k, const_key(v)) for k, v in generics.items()) if generics else ()]
    seen: dict[int, int] = {}  # handle identity -> first position
    for i, (p, a) in enumerate(zip(params, args, strict=False)):
        cls = type(a)
        if cls is Tensor:
            t, tile_shape = a, None
        elif cls is Partition or cls is Shared:
            t = a._tensor
            tile_shape = a.tile_shape if cls is Partition else None
            if a._fate is not None and not _in_flight(a._fate):
                return None
        elif p.kind == "const":
            parts.append(const_key(a))
            continue
        else:
            parts.append(cls)
            continue
        if (t._fate is not None and not _in_flight(t._fate)) or t._storage.freed_at is not None:
            return None
        parts.append((cls, t._layout, tile_shape, seen.setdefault(id(a), i)))
    return tuple(parts) if seen else None


class Plan:
    """A checked call layout: the compiled kernel, grid, device and how to pack the entry ABI."""

    __slots__ = (
        "alias",
        "bare",
        "chained",
        "compiled",
        "device",
        "distinct",
        "explicit",
        "generics",
        "given",
        "grid",
        "handles",
        "held",
        "inner",
        "lent",
        "moved",
        "others",
        "outputs",
        "packing",
        "pairs",
        "params",
        "prepared",
        "scalars",
        "shares",
        "site",
        "synced",
        "tail",
        "tensors",
        "user_consts",
        "wrapped",
    )

    def __init__(
        self,
        compiled: CompiledKernel,
        params: Sequence[Param],
        args: Sequence[Any],
        *,
        given: int,
        grid: tuple[int, int, int],
        device: object,
        explicit: object = None,
        generics: dict[str, Any] | None = None,
    ) -> None:
        # The one check of the compiled code's view of each argument (dtype, rank, extents, tile shape) against the
        # arguments: here, before the plan exists, since every launch of this layout reuses the plan unchecked.
        check_abi(compiled, params, args)
        self.compiled, self.grid, self.device, self.params = compiled, grid, device, tuple(params)
        self.tail = tuple(args[given:])  # trailing Const values that were passed as keywords
        self.handles = tuple(i for i, a in enumerate(args) if isinstance(a, _HANDLE_CLASSES))
        # No handle passed twice (the key fixes the identity pattern): each can be handed over without a lookup.
        self.distinct = len({id(args[i]) for i in self.handles}) == len(self.handles)
        self.outputs = tuple(i for i in self.handles if isinstance(args[i], Partition))
        self.scalars = tuple((i, p, *_passes(p)) for i, p in enumerate(params) if p.kind in ("scalar", "ptr"))
        self.packing = _packing(compiled, params, args)
        self.prepared: tuple[Any, ...] | None = None  # (stream, grid, packed arguments, the prepared launch)
        # (code, line, "file:line", fate, lasti) of the last call site: the code object and its instruction offset
        # (f_lasti) name one line, and are read per call where the line is not
        self.site: tuple[Any, ...] = (None, 0, "", ("", ""), -1)
        self.chained: tuple[str, Any] | None = None  # the fate `_fastlaunch.claim_run` gave the last chained launch
        self.synced: tuple[Any, ...] | None = None  # (code, lasti, verb, fate) of the last `_fastlaunch.sync` site
        self.lent: InFlight | None = None  # the fate of the last launch's handles handed on early (`Launch._execute`)
        self._layout(params, args, given, explicit, generics or {})

    def _layout(
        self, params: Sequence[Param], args: Sequence[Any], given: int, explicit: object, generics: dict[str, Any]
    ) -> None:
        """What `admit` compares a call with: this plan's `layout_key`, spread by argument kind."""
        self.given, self.explicit, self.generics = given, explicit, dict(generics)
        self.tensors = tuple((i, args[i]._layout) for i in self.handles if type(args[i]) is Tensor)
        self.wrapped: tuple[tuple[int, type[Any], Any, tuple[int, ...] | None], ...] = tuple(
            (i, type(a), a._tensor._layout, a.tile_shape if isinstance(a, Partition) else None)
            for i, a in enumerate(args)
            if type(a) is Partition or type(a) is Shared
        )
        self.shares = tuple(i for i, _, _, tile in self.wrapped if tile is None)
        self.bare = tuple(i for i, _ in self.tensors)
        self.inner = tuple(i for i, *_ in self.wrapped)
        self.held = tuple((i, i in self.inner) for i in self.handles)  # (position, is the tensor inside a wrapper)
        self.moved = self.bare + self.outputs  # the handles a launch moves (a share is not moved, nor lent)
        # Scalars by class, Const values by class and value (`layout_key` keys them so).
        self.others = tuple(
            (i, type(args[i]), p.kind == "const", args[i])
            for i, p in enumerate(params[:given])
            if i not in self.handles
        )
        self.pairs = tuple(
            (i, j) for i in self.handles for j in self.handles if i < j and type(args[i]) is type(args[j])
        )
        self.alias = tuple((o, tuple(j for j in self.handles if j != o)) for o in self.outputs)
        # Comparing a call's Const or generic values with this plan's runs their type's __eq__: user code, unless the
        # type is a builtin or numpy one (then `try_launch` checks the handles again after it).
        self.user_consts = any(const and not _plain(cls) for _, cls, const, _ in self.others) or any(
            not _plain(type(v)) for v in self.generics.values()
        )

    def try_launch(
        self, args: Sequence[Any], check: Callable[[Param, Any], None], unchecked: bool, *, recheck: bool = False
    ) -> Sequence[Any] | None:
        """Re-check what may differ from the call that made the plan (``layout_key`` already found every handle live);
        return all the call's values (keyword ``Const`` values appended), or None when the full path must run.

        A scalar of a user-defined type runs user code while it is checked (its ``__int__``), which may move or free
        a handle checked before; then (and with ``recheck``, when hashing keys ran user code) the handles are checked
        again after it, so nothing that ran between the checks and the move can change what is moved."""
        plain: list[Any] | None = None
        try:
            for i, p, exact, lo, hi in self.scalars:
                value = args[i]
                cls = type(value)
                # (no metaclass first: a class is then compared by identity, so no user code runs in the lookups)
                if type(cls) is type and cls in exact and (lo is None or lo <= value <= hi):
                    continue  # what the check passes, decided without calling it (`_passes`)
                if not _plain(cls):
                    recheck = True
                    if type(type(value)) is not type:  # the full path's check refuses it (its metaclass runs code)
                        return None
                    if plain is None:
                        plain = list(args)
                    value = plain[i] = plain_number(value)  # the value checked is the value packed
                check(p, value)
        except Exception:  # the full path reports it, in argument order
            return None
        if plain is not None:
            args = plain
        if recheck and not self._live(args):
            return None
        if self.alias and not unchecked and _overlaps(self, args):
            return None
        return (*args, *self.tail) if self.tail else args

    def _live(self, args: Sequence[Any]) -> bool:
        """True when every handle argument is still live (or in flight, for a kernel call to take) and unfreed."""
        for i in self.handles:
            a = args[i]
            f = a._fate
            if f is not None and not _in_flight(f):
                return False
            t = a if type(a) is Tensor else a._tensor
            if (t is not a and t._fate is not None) or t._storage.freed_at is not None:
                return False
        return True

    def admit(
        self,
        args: tuple[Any, ...],
        generics: dict[str, Any],
        explicit: object,
        check: Callable[[Param, Any], None],
        unchecked: bool,
    ) -> Sequence[Any] | None:
        """`layout_key` and `try_launch` in one pass for a call that should have this plan's layout: all the call's
        values when it has exactly this layout and passes every re-check, else None (then the keyed path runs)."""
        if len(args) != self.given or explicit is not self.explicit:
            return None
        if generics and not all(type(k) is str and _plain(type(v)) for k, v in generics.items()):
            # Comparing another class's value runs the user's __eq__ inside the step, OWNERSHIP held (review 43: one
            # waiting for another thread's use of a tensor hung both); the keyed path checks it (ArgumentError).
            return None
        if generics != self.generics:
            return None
        if generics and not all(_same_sign(v, self.generics[k]) for k, v in generics.items()):
            return None
        if not self._matches(args):
            return None
        return self.try_launch(args, check, unchecked, recheck=self.user_consts)

    def _matches(self, args: tuple[Any, ...]) -> bool:
        """True when the arguments have this plan's layout (as `layout_key` sees it) and every handle is live (or in
        flight: a chain of this plan's own launches hands on ``self.lent``, which one identity test accepts)."""
        lent = self.lent
        for i, layout in self.tensors:
            t = args[i]
            if (
                type(t) is not Tensor
                or ((f := t._fate) is not None and f is not lent and (type(f) is not InFlight or f[0] is not IN_FLIGHT))
                or t._storage.freed_at is not None
                or (t._layout is not layout and t._layout != layout)
            ):
                return False
        for i, cls, layout, tile in self.wrapped:
            a = args[i]
            if (
                type(a) is not cls
                or ((f := a._fate) is not None and f is not lent and (type(f) is not InFlight or f[0] is not IN_FLIGHT))
                or (tile is not None and a._tile_shape != tile)
            ):
                return False
            t = a._tensor
            own = t._layout
            if t._fate is not None or t._storage.freed_at is not None or (own is not layout and own != layout):
                return False
        for i, j in self.pairs:
            if args[i] is args[j]:
                return False
        return all(
            type(args[i]) is cls and not (const and (args[i] != value or not _same_sign(args[i], value)))
            for i, cls, const, value in self.others
        )

    def hand_over(self, values: Sequence[Any], fate: tuple[str, str]) -> tuple[tuple[Any, ...], Taken | None]:
        """Move the (distinct, just checked) handles into a launch: the values it hands back once done, and the
        handles taken in flight (their launches must come first: `Launch._order_after`), or None."""
        out = list(values)
        after: Any = None
        for i in self.moved:
            v = values[i]
            lent = v._fate
            if lent is not None and lent is not after:  # in flight (nothing else gets here)
                after = lent if after is None else _more(after, lent)
            out[i] = v._hand_over(fate)
        return tuple(out), after

    def enqueue(self, values: tuple[Any, ...], grid: tuple[int, int, int], stream: Any) -> None:
        """Launch on ``stream``: again the last prepared launch when stream, grid and arguments repeat."""
        assert self.packing is not None, "only GPU plans are enqueued"
        template, slots, kinds = self.packing
        fast = _accel.replay
        if fast is not None:  # the same packing and relaunch, compiled: None when it relaunched
            args = fast(self, values, grid, stream)
            if args is None:
                return
        else:
            packed = list(template)
            for pos, mode, i in slots:
                v = values[i]
                if mode == _BASE:
                    packed[pos] = (v if type(v) is Tensor else v._tensor)._range[0]
                else:
                    packed[pos] = int(v) if mode == _INT else v if v else _raw(v)  # (a zero: see _raw)
            args = tuple(packed)
            last = self.prepared
            if last is not None and last[0] is stream and last[2] == args and last[1] == grid:
                last[3]()
                return
        prepared = prepared_launch(self.compiled, grid, args, kinds, stream)
        self.prepared = (stream, grid, args, prepared)
        prepared()


_accel.bind(
    Tensor=Tensor,
    Partition=Partition,
    Shared=Shared,
    Storage=Storage,
    Plan=Plan,
    Launch=Launch,
    InFlight=InFlight,
    IN_FLIGHT=IN_FLIGHT,
    PLAIN=_PLAIN,
    FOREIGN=_FOREIGN,
    OURS=OURS,
    OWNERSHIP=OWNERSHIP,
    NEG_ZERO=NEG_ZERO,
)


def _passes(p: Param) -> tuple[tuple[type[Any], ...], int | None, int | None]:
    """The builtin classes (exactly) and, for integers, the range of the values that ``p``'s scalar check passes, so
    `Plan.try_launch` (and `_fastlaunch`) need not call it for them: an int or float within ``FLOAT_INT`` for a float
    scalar, an int in range for an integer one, a bool for a boolean one; nothing for a raw pointer (its check reads
    the kernel's ``unchecked``). Anything else goes through the check, which raises the typed error."""
    if p.kind != "scalar":
        return (), None, None
    dtype = p.dtype
    assert isinstance(dtype, DType), "scalar annotations are concrete dtypes"
    if dtype.kind == "f":  # (an int beyond FLOAT_INT converts to no float; nan and inf compare false: the check runs)
        return (int, float), -FLOAT_INT, FLOAT_INT
    if dtype.kind == "b":
        return (bool,), None, None
    return ((int,), *int_range(dtype))


def _plain(cls: type[Any]) -> bool:
    """True for a class in `_PLAIN`, tested without running user code: a metaclass's ``__hash__`` and ``__eq__`` run
    when a class is looked up in a set (and could claim it is ``int``), so a class with a metaclass is never plain
    (`_fastlaunch.scalars_ok` tests the same)."""
    return type(cls) is type and cls in _PLAIN


def _more(after: Taken, lent: InFlight) -> tuple[InFlight, ...]:
    """``after`` with one more lender (handles of several launches in flight: rare)."""
    known = (after,) if type(after) is InFlight else after
    return known if lent in known else (*known, lent)  # type: ignore[return-value]  # a tuple of InFlight


def _in_flight(fate: tuple[str, str]) -> bool:
    """True for the fate of a handle a kernel call may take in flight (see `InFlight.takeable`)."""
    return type(fate) is InFlight and fate.takeable()


def _overlaps(plan: Plan, args: Sequence[Any]) -> bool:
    """True when an output overlaps another argument or any live handle outside the launch; the common case (an
    output whose storage holds no other handle) needs no set."""
    for o, others in plan.alias:
        t = args[o]._tensor
        lo, hi = t._range
        for j in others:
            a = args[j]
            other_lo, other_hi = (a if type(a) is Tensor else a._tensor)._range
            if other_lo < hi and lo < other_hi:
                return True
        storage = t._storage
        if len(storage._handles) == 1 and not _FOREIGN and not storage._exports:
            continue  # the one registered handle is the live output itself
        tensors = tuple(args[j] if type(args[j]) is Tensor else args[j]._tensor for j in plan.handles)
        if overlapping(storage, lo, hi, exclude=tensors):
            return True
    return False


def _packing(compiled: CompiledKernel, params: Sequence[Param], args: Sequence[Any]) -> Packing | None:
    """The GPU entry-ABI packing with extents and strides resolved (fixed by the layout); None on the host."""
    if compiled.target.arch == "cpu":
        return None
    index = {p.name: i for i, p in enumerate(params)}
    template: list[Any] = []
    slots: list[Slot] = []
    kinds: list[str] = []
    for pos, slot in enumerate(compiled.abi.slots):
        i = index[slot.param]
        a = args[i]
        template.append(None)
        if slot.role == "base":
            slots.append((pos, _BASE, i))
            kinds.append("ptr")
        elif slot.role in ("shape", "stride"):
            t = a if isinstance(a, Tensor) else a._tensor
            template[pos] = (t.shape if slot.role == "shape" else t.strides)[slot.axis]
            kinds.append(GPU_KIND[slot.dtype])
        elif slot.role == "pointer":
            slots.append((pos, _INT, i))
            kinds.append("ptr")
        else:
            slots.append((pos, _INT if slot.dtype in _INT_KINDS else _RAW, i))
            kinds.append(GPU_KIND.get(slot.dtype, slot.dtype))
    return tuple(template), tuple(slots), tuple(kinds)
