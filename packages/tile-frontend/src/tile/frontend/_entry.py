"""``@tile.entry``: a Python tile kernel becomes a `Kernel` whose calls return `Launch` ops.

Invariants: a call checks the arguments (kinds, dtypes, ranks, static extents, generics, grid), then the ownership
rules, then compiles the specialization (cached per kernel by `Specialization` and `Target`), and only then moves
the arguments into the returned `Launch`, so every failure leaves the caller's handles usable. The target follows
the arguments: host tensors compile for ``Target.cpu()`` and run on the interpreter, device tensors for the
device's arch. ``unchecked=True`` skips the aliasing checks and allows raw ``Ptr`` parameters; handles are still
moved and handed back after completion. A call whose argument layout passed these checks before takes the kernel's
`Plan` (see `_plan`): it re-checks only what can change (handle states, scalar values, aliasing) and otherwise
runs the full path above, so both paths accept and reject exactly the same calls. The plan of the kernel's latest
call is tried first, argument by argument, without building the key (`Plan.admit`, the steady state of a loop).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, overload

from tile.compiler import (
    ArraySpec,
    ByArch,
    CompiledKernel,
    CompileOptions,
    ScalarSpec,
    SpecError,
    Specialization,
    Target,
    compile_kernel,
)
from tile.compiler._captures import Captures
from tile.compiler._spec import canonical_dtype
from tile.compiler.lang import DType
from tile.frontend import _accel, _knobs, _ownership
from tile.frontend._entry_spec import (
    array_spec,
    captures_of,
    check_guards,
    compile_layout_key,
    const_keywords,
    device_of,
    target_of,
)
from tile.frontend._errors import ArgumentError, FrozenError, refuse_subclass
from tile.frontend._groups import GroupedLaunch, Lengths, flat_params, flatten, lengths_of, snapshot
from tile.frontend._launch import Launch, taken_in_flight
from tile.frontend._plan import Plan, launch_again, layout_key
from tile.frontend._shared import HANDLES, tensor_of
from tile.frontend._signature import (
    CHECKS,
    Bound,
    Param,
    bind,
    explicit_grid,
    launch_grid,
    read_params,
    with_schemes,
)
from tile.frontend._site import user_site
from tile.frontend._storage import OWNED, owning

__all__ = ["Kernel", "entry"]

_PLAN_CAP = 256
_RECENT = 6  # plans of recent layouts tried before the keyed lookup (see Kernel._recent)
_FIXED = frozenset({"fn", "unchecked", "options", "params", "_grid"})  # what launches are checked against


class Kernel:
    """A ``@tile.entry`` kernel: call it with its arguments to get a `Launch` (a lazy ``DeviceOp``).

    Const generics are inferred from partition tile shapes and static dims, or passed as keywords
    (``gemm(z, x, y, BK=64)``). ``kernel.grid((x, y, z))(...)`` sets the grid of kernels without ``Mut`` outputs.
    """

    __name__: str
    _last: Plan | None = None  # the plan of the latest call (of distinct handles): tried first, without a key
    # The plans of the latest calls of other layouts (at most _RECENT, newest first), tried next the same way: a model
    # calls one kernel with a few shapes in turn (a GEMV for each projection), which would miss a single latest plan.
    _recent: tuple[Plan, ...] = ()
    # What the compiled code read from globals, closures and modules (None: not compiled since it last changed); each
    # call tests it first (`Captures.fresh`: by identity, by value only where that misses) and recompiles if it moved.
    _captures: Captures | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise refuse_subclass(cls)  # launches trust this class's methods: see FinalClassError

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        unchecked: bool = False,
        options: CompileOptions | None = None,
        grid: tuple[int, ...] | None = None,
    ) -> None:
        # The opt-out belongs to this kernel object alone: it travels in the compile options (so in every compile
        # cache key), never as a mark on ``fn``, which a checked kernel of the same function shares.
        options = dataclasses.replace(options or CompileOptions(), unchecked=unchecked)
        self.fn, self.unchecked, self.options, self._grid = fn, unchecked, options, grid
        self.params: tuple[Param, ...] = read_params(fn)
        # Tuple parameters: this kernel delegates each call to the flat kernel of its tuples' lengths (see _groups),
        # which has one parameter per element and hands the arguments back regrouped.
        self._grouped = any(p.kind == "tuple" for p in self.params)
        self._lengths: dict[str, int] = {}  # a flat kernel: each tuple parameter's length (compile-time len(t))
        self._regroup: Lengths | None = None  # a flat kernel: how to regroup its arguments
        self._flat: dict[tuple[Lengths, tuple[int, ...] | None], Kernel] = {}
        self._cache: dict[tuple[Specialization, Target], CompiledKernel] = {}
        # Repeated launches with the same layouts skip building the Specialization (most of a call's host time).
        self._by_layout: dict[tuple[Any, ...], CompiledKernel] = {}
        # The steady-state launch path: a call layout already checked once (see _plan) skips bind and specialize.
        self._plans: dict[Any, Plan] = {}
        self._lock = threading.Lock()
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"<tile kernel {self.fn.__qualname__}{' (unchecked)' if self.unchecked else ''}>"

    def grid(self, grid: object) -> Kernel:
        """This kernel with an explicit launch grid (1 to 3 ints)."""
        clone = Kernel.__new__(Kernel)
        clone.__dict__.update(self.__dict__)
        clone.__dict__["_grid"] = explicit_grid(grid)  # a new kernel object: `__setattr__` guards only assignments
        return clone

    def __setattr__(self, name: str, value: Any) -> None:
        # What every plan and compiled kernel was checked against stays fixed: `k.unchecked = True` would be an opt-out
        # nobody can grep for, a new `params`/`fn` would launch code the checks never saw.
        if name in _FIXED and name in self.__dict__:
            raise FrozenError(
                f"{self!r}.{name} cannot change after the kernel was made: launches were checked against it; make a "
                f"new kernel, e.g. @tile.entry(unchecked=True) or kernel.grid(g) for another grid"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in _FIXED:
            raise FrozenError(f"{self!r}.{name} cannot be deleted: launches were checked against it")
        object.__delattr__(self, name)

    def __call__(self, *args: Any, **generics: int) -> Launch:
        """Check the arguments and the ownership rules, compile if needed, and move the arguments into a launch.

        Parameters
        ----------
        *args
            One value per kernel parameter: a `Partition` for each ``Mut`` output, a `Tensor` for each input,
            numbers for scalars and ``Const`` parameters (trailing ``Const`` parameters may be keywords), and a
            tuple (or list) of those for each ``tuple[...]`` parameter, every element checked and moved like a lone
            argument.
        **generics
            Const generics that cannot be inferred (``BK=64``).

        Returns
        -------
        Launch
            A lazy ``tile.aio.DeviceOp`` whose output is the tuple of all arguments, handed back once done (a
            tuple parameter's elements as a tuple).

        Raises
        ------
        ArgumentError, GridError, OwnershipError, BackendError, tile.compiler.CompileError
            Before anything is moved: the caller's handles stay usable.
        """
        if self._grouped:
            flat, args, generics = self._flatten(args, generics)
            return flat(*args, **generics)
        plan = self._last  # never set on a flat (grouped) kernel: the compiled path makes plain Launch objects
        if plan is not None:
            # The latest plan, then the recent ones (each accepts exactly the calls of its own layout); compiled, each
            # is one C call (None: not handled) and the pure path's test of the latest plan comes after them all. The
            # C call tests the compile-time reads by identity first; `_fresh` tests them on the pure path, and on the
            # compiled one after a miss (by value where identity misses: a changed global recompiles).
            fast = _accel.call
            launch: Launch | None = fast(plan, self, args, generics) if fast is not None else None
            if launch is not None:
                return launch
            if self._fresh():
                if fast is None and (launch := self._call_again(plan, args, generics)) is not None:
                    return launch
                again = fast if fast is not None else self._again
                for other in self._recent:
                    if other is not plan:
                        launch = again(other, self, args, generics)
                        if launch is not None:
                            self._last = other
                            return launch
                if fast is not None:
                    launch = self._call_again(plan, args, generics)
                    if launch is not None:
                        return launch
        return self._call_checked(args, generics)

    def _fresh(self) -> bool:
        """Whether the compiled code's reads of globals still hold (`Captures.fresh`); if not, forget it all."""
        captured = self._captures
        if captured is not None and captured.fresh():
            return True
        self._forget()  # a global it read at compile time changed: recompile (every cached plan is of the old code)
        return False

    def _forget(self) -> None:
        """Drop every compiled kernel and plan of this kernel object (new containers: a ``kernel.grid(g)`` clone that
        shares the old ones checks its own captures and forgets them itself)."""
        with self._lock:
            self.__dict__.update(_cache={}, _by_layout={}, _plans={}, _captures=None)
            self._last, self._recent = None, ()

    def _again(self, plan: Plan, kernel: Kernel, args: tuple[Any, ...], generics: dict[str, int]) -> Launch | None:
        """`_call_again` in the C call's argument order (the pure path's stand-in for ``_accel.call``)."""
        return self._call_again(plan, args, generics)

    def _remember(self, plan: Plan) -> None:
        """Make ``plan`` the latest (tried first by the next call), keeping the previous ones in `_recent`."""
        self._last = plan
        self._recent = (plan, *(p for p in self._recent if p is not plan))[:_RECENT]

    def _flatten(self, args: Sequence[Any], generics: dict[str, Any]) -> tuple[Kernel, tuple[Any, ...], dict[str, Any]]:
        """The flat kernel for these tuple lengths, and the arguments flattened for it (nothing is checked yet)."""
        args, generics = const_keywords(self.__name__, self.params, args, dict(generics))
        if len(args) != len(self.params):
            names = ", ".join(p.name for p in self.params)
            raise ArgumentError(
                f"{self.__name__}({names}) takes {len(self.params)} arguments but {len(args)} were given"
            )
        args = snapshot(self.params, args)  # each container read once: lengths and elements agree
        lengths = lengths_of(self.__name__, self.params, args)
        key = (lengths, self._grid)
        flat = self._flat.get(key)
        if flat is None:
            with self._lock:
                flat = self._flat.get(key)
                if flat is None:
                    flat = self._flat[key] = self._flat_kernel(lengths)
        return flat, flatten(args, lengths), generics

    def _flat_kernel(self, lengths: Lengths) -> Kernel:
        clone = Kernel.__new__(Kernel)
        clone.__dict__.update(self.__dict__)
        clone.__dict__.update(
            params=flat_params(self.params, lengths),
            _grouped=False,
            _lengths={p.name: n for p, n in zip(self.params, lengths, strict=True) if n is not None},
            _regroup=lengths,
            _flat={},
            _cache={},
            _by_layout={},
            _plans={},
            _lock=threading.Lock(),
        )
        return clone

    @owning
    def _call_again(self, plan: Plan, args: tuple[Any, ...], generics: dict[str, int]) -> Launch | None:
        """The latest plan's launch, its checks and the move as one step (no other thread, and no collector run, takes
        a handle in between); None when the call does not fit that plan."""
        return launch_again(plan, self, args, generics)

    def _call_checked(self, args: tuple[Any, ...], generics: dict[str, int]) -> Launch:
        """`__call__` past the latest plan: the keyed plan's re-checks, else every check and the compile."""
        self._fresh()  # before the keyed plans: they are of the code compiled with the reads as they were
        with OWNED:
            site = user_site()
            key = layout_key(self.params, args, generics, self._grid)
            plan = self._plans.get(key) if key is not None else None
            if plan is not None:
                # The key's hashing ran the __hash__/__eq__ of Const and generic values: check the handles again.
                values = plan.try_launch(args, self._check_scalar, self.unchecked, recheck=True)
                if values is not None:
                    if plan.distinct and self._regroup is None:
                        self._remember(plan)
                    return self._launch(plan, values, site, checked=plan.distinct)
        self._prepare(args, dict(generics))  # every check, and the compile, without holding the lock
        with OWNED:  # then the checks again (the kernel is compiled now) and the move, as one step
            return self._launch_new(args, generics, key, site)

    def _launch_new(self, args: Sequence[Any], generics: dict[str, int], key: Any, site: str) -> Launch:
        """The full path's launch: check, make and store the plan, move the arguments (holding `OWNERSHIP`)."""
        bound, compiled, device, captured = self._prepare(args, dict(generics))
        grid = bound.grid
        assert grid is not None, "_prepare sets the grid or raises GridError"
        plan = Plan(
            compiled,
            with_schemes(self.params, compiled.abi),  # Launch.grid(...) re-checks a grid against these
            bound.values,
            given=len(args),
            grid=grid,
            device=device,
            explicit=self._grid,
            generics=generics,
        )
        with self._lock:  # kept only while its code's record is still the kernel's (not forgotten meanwhile)
            if key is not None and self._captures is captured:
                if len(self._plans) >= _PLAN_CAP:  # ever-new layouts (say, a growing size) must not grow unbounded
                    self._plans.clear()
                self._plans[key] = plan
                if plan.distinct and self._regroup is None:  # the compiled path makes plain Launch objects
                    self._remember(plan)
        return self._launch(plan, bound.values, site)

    def _launch(self, plan: Plan, args: Sequence[Any], site: str, *, checked: bool = False) -> Launch:
        """Move the arguments into a launch (``checked``: their states were just checked and no handle repeats)."""
        name = self.__name__
        if checked:
            values, after = plan.hand_over(args, ("launch", f"moved into the launch of {name} at {site}"))
        else:
            after = taken_in_flight(args)  # before the move: it replaces the fates that tell
            values = tuple(_ownership.move(name, args, site))
        if self._regroup is not None:
            return GroupedLaunch(self._regroup, name, plan, values, site, after)
        return Launch(name, plan, values, site, after)

    def _check_scalar(self, p: Param, value: Any) -> None:
        CHECKS[p.kind](self.__name__, p, value, {}, self.unchecked)

    def compile(self, *args: Any, **generics: int) -> CompiledKernel:
        """Check and compile for these arguments without launching or moving them (a warm-up)."""
        if self._grouped:
            flat, flat_args, generics = self._flatten(args, generics)
            return flat.compile(*flat_args, **generics)
        return self._prepare(args, generics)[1]

    def _record(self) -> tuple[Captures, dict[tuple[Any, ...], CompiledKernel], dict[Any, CompiledKernel]]:
        """The record of the compile-time reads and the caches of the code compiled from it, taken together (another
        thread's `_forget` replaces all three at once): code compiled from this record goes only into its caches."""
        while True:
            # Before the compile (a disk-cache hit compiles nothing): refuses a global that is not a value or code.
            record = None if self._fresh() else captures_of(self.fn)
            with self._lock:
                if self._captures is None and record is not None:
                    self._captures = record
                if self._captures is not None:
                    return self._captures, self._by_layout, self._cache

    def _prepare(self, args: Sequence[Any], generics: dict[str, int]) -> tuple[Bound, CompiledKernel, object, Captures]:
        """Bind, check and compile for these arguments; also the record of reads the code was compiled from."""
        name = self.__name__
        captured, by_layout, cache = self._record()
        args, generics = const_keywords(name, self.params, args, generics)
        bound = bind(name, self.params, args, generics, grid=self._grid, unchecked=self.unchecked)
        device = device_of(_ownership.check(name, self.params, args, self.unchecked))
        layout = (compile_layout_key(device, bound), self._grid is None)  # kernel.grid(g) clones share this cache
        compiled = by_layout.get(layout)
        if compiled is None:
            spec = self._specialize(bound)
            compiled = by_layout[layout] = self._compiled(spec, target_of(device), captured, cache)
        # Whether an output fixes the grid is how the compiled code addresses it (the ABI), not the kernel's text.
        bound.grid = launch_grid(name, with_schemes(self.params, compiled.abi), bound.values, self._grid)
        check_guards(name, self.params, bound, compiled)
        return bound, compiled, device, captured

    def _specialize(self, bound: Bound) -> Specialization:
        params: dict[str, ArraySpec | ScalarSpec] = {}
        for p, value in zip(self.params, bound.values, strict=False):
            if isinstance(value, HANDLES):
                params[p.name] = array_spec(p, tensor_of(value), self.options.max_divisibility)
            elif p.kind in ("scalar", "ptr") and isinstance(p.dtype, DType):
                dt = canonical_dtype(p.dtype.name)
                params[p.name] = ScalarSpec(f"ptr<{dt}>" if p.kind == "ptr" else dt)
        dtypes = {name: canonical_dtype(dt.name) for name, dt in bound.dtypes.items()}
        options = self.options
        if _knobs.debug_guards() and not options.debug_guards:
            options = dataclasses.replace(options, debug_guards=True)
        if _knobs.pdl() and not options.pdl:
            options = dataclasses.replace(options, pdl=True)
        # Without an explicit grid the launch grid is the outputs' own tile grid: a tiles() walk runs once per block.
        own_grid = self._grid is None
        consts = {**bound.consts, **self._lengths}  # a tuple's length is a compile-time len() in the kernel
        return Specialization.make(params, consts, dtypes, options, own_grid=own_grid)

    def _compiled(
        self, spec: Specialization, target: Target, captured: Captures, cache: dict[Any, CompiledKernel]
    ) -> CompiledKernel:
        """The code of ``spec`` for ``target`` compiled from the reads ``captured`` (cached in its ``cache``)."""
        key = (spec, target)
        found = cache.get(key)
        if found is None:
            with self._lock:
                found = cache.get(key)
                if found is None:
                    found = cache[key] = compile_kernel(self.fn, spec, target, captures=captured)
        return found


_Hint = int | ByArch | None


@overload
def entry(fn: Callable[..., Any], /) -> Kernel: ...
@overload
def entry(
    *,
    unchecked: bool = False,
    opt_level: int = 3,
    occupancy: _Hint = None,
    num_ctas: _Hint = None,
    num_cta_in_cga: _Hint = None,
    num_worker_warps: _Hint = None,
    flush_to_zero: bool = False,
    approx: bool = False,
    fp_contract: bool = True,
    pdl: bool = False,
) -> Callable[[Callable[..., Any]], Kernel]: ...
def entry(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    unchecked: bool = False,
    opt_level: int = 3,
    occupancy: _Hint = None,
    num_ctas: _Hint = None,
    num_cta_in_cga: _Hint = None,
    num_worker_warps: _Hint = None,
    flush_to_zero: bool = False,
    approx: bool = False,
    fp_contract: bool = True,
    pdl: bool = False,
) -> Kernel | Callable[[Callable[..., Any]], Kernel]:
    """Make ``fn`` a tile kernel: ``@tile.entry`` or ``@tile.entry(unchecked=True, occupancy=2)``.

    Parameters
    ----------
    fn
        The kernel: a Python function in the kernel language with annotated parameters.
    unchecked
        Opt out of the launch-time aliasing checks and allow raw ``Ptr`` parameters (greppable on purpose).
    opt_level
        tileiras' optimisation level (0 to 3).
    occupancy, num_ctas, num_worker_warps
        Tile IR entry hints: blocks per SM (1 to 32), CTAs per cluster (1, 2, 4, 8 or 16; ``num_cta_in_cga`` is
        the Tile IR name, accepted too), worker warps per CTA (4 or 8). Each takes an int or a per-arch table,
        ``tile.by_arch(sm_90=2, sm_100=4, default=1)``; a compile uses its target's entry (else ``default``).
    flush_to_zero, approx
        The kernel's default math modes: f32 ops flush subnormals to zero (where Tile IR's op allows it: ``+ - *
        /``, ``fma``, ``maximum``/``minimum``, ``exp2``, ``sqrt``, ``rsqrt``); f32 division, ``sqrt``, ``exp`` and
        ``tanh`` are approximate. A call's own ``flush_to_zero=``/``rounding=`` wins over the default.
    fp_contract
        Fuse ``a * b + c`` and ``a * b - c`` into one fused multiply-add where the product has no other use (on by
        default, as in nvcc and cuTile Python; the fused result is rounded once). ``False`` rounds every product.
    pdl
        Programmatic dependent launch (sm_90+; bytecode 13.4+): the kernel may start while the kernel before it on
        the stream is still finishing, so its launch and prologue overlap that kernel's tail (in a CUDA graph the
        edge becomes programmatic). Safe by construction: the compiler makes the kernel's first op a wait for the
        grids before it (``griddepcontrol.wait``) and orders every memory access after it; only such a kernel is
        launched with the attribute. Pair it with ``tile.launch_dependents()`` in the kernel before it to let this
        one start early.

    Returns
    -------
    Kernel
        Call it with the kernel's arguments to get a `Launch` (a ``tile.aio.DeviceOp``).

    Raises
    ------
    tile.compiler.SpecError
        For an invalid hint value (out of range, unknown arch in ``tile.by_arch``, both ``num_ctas`` and
        ``num_cta_in_cga``).
    """
    if num_ctas is not None and num_cta_in_cga is not None:
        raise SpecError("pass num_ctas or num_cta_in_cga (the same hint), not both")
    options = CompileOptions(
        opt_level=opt_level,
        occupancy=occupancy,
        num_cta_in_cga=num_ctas if num_ctas is not None else num_cta_in_cga,
        num_worker_warps=num_worker_warps,
        flush_to_zero=flush_to_zero,
        approx=approx,
        fp_contract=fp_contract,
        pdl=pdl,
    )

    def wrap(f: Callable[..., Any]) -> Kernel:
        return Kernel(f, unchecked=unchecked, options=options)

    return wrap(fn) if fn is not None else wrap
