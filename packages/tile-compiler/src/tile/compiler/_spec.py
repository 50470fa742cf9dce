"""What a kernel is compiled for: the specialization, the target and the entry ABI, as small frozen values.

Invariants: every value here is immutable, hashable, picklable and validated on construction; `key()` returns
bytes that are equal exactly when two values compile to the same code, so caches hash them directly. Extents of
tensor arguments never appear (only the facts that change code: dtype, rank, static dims, the stride-one pattern
and power-of-two divisibility capped at 16, as cuTile Rust does); so one compiled kernel serves every size.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from tile.compiler._errors import TileError
from tile.compiler._guards import HostGuard

__all__ = [
    "ARCHS",
    "DIV_CAP",
    "DTYPES",
    "AbiSlot",
    "ArraySpec",
    "ByArch",
    "CompileOptions",
    "KernelABI",
    "ScalarSpec",
    "SpecError",
    "Specialization",
    "Target",
    "by_arch",
    "canonical_dtype",
    "hint_for",
    "pow2_divisor",
]

DIV_CAP = 16
"""Divisibility facts are bucketed by powers of two up to this cap (bytes for pointers, elements otherwise)."""
# Element types by canonical name (Tile IR spelling, plus unsigned ints that lower to signless ones): byte size.
_ITEMSIZE = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "u8": 1, "u16": 2, "u32": 4, "u64": 8, "f16": 2}
_ITEMSIZE |= {"bf16": 2, "f32": 4, "tf32": 4, "f64": 8, "f8E4M3FN": 1, "f8E5M2": 1, "f8E8M0FNU": 1}
DTYPES: tuple[str, ...] = tuple(_ITEMSIZE)
_ALIASES = {"bool": "i1", "float16": "f16", "half": "f16", "bfloat16": "bf16", "float32": "f32", "float": "f32"}
_ALIASES |= {"float64": "f64", "double": "f64", "int": "i32", "f8e4m3fn": "f8E4M3FN", "f8e5m2": "f8E5M2"}
_ALIASES |= {f"int{n}": f"i{n}" for n in (8, 16, 32, 64)} | {f"uint{n}": f"u{n}" for n in (8, 16, 32, 64)}
ARCHS: tuple[str, ...] = ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103", "sm_107")
ARCHS += ("sm_110", "sm_120", "sm_121")
_CPU = "cpu"
Const = int | float | bool


class SpecError(TileError, ValueError):
    """A specialization, target or ABI value is malformed (the message names the field and the fix)."""


def canonical_dtype(name: str) -> str:
    """Return the canonical spelling of dtype ``name`` ("float16" -> "f16"), raising `SpecError` if unknown."""
    if name in _ITEMSIZE:
        return name
    if (alias := _ALIASES.get(name.lower())) is not None:
        return alias
    if name.startswith("ptr<") and name.endswith(">"):
        return f"ptr<{canonical_dtype(name[4:-1])}>"
    raise SpecError(f"unknown dtype {name!r}: use one of {', '.join(DTYPES)}")


def pow2_divisor(value: int, cap: int = DIV_CAP) -> int:
    """Return the largest power of two dividing ``value``, at most ``cap`` (0 is divisible by everything)."""
    if value == 0:
        return cap
    return min(abs(value) & -abs(value), cap)


def _check_div(what: str, value: int) -> None:
    if value < 1 or value > DIV_CAP or value & (value - 1):
        raise SpecError(f"{what} = {value} must be a power of two from 1 to {DIV_CAP}")


@dataclass(frozen=True)
class ArraySpec:
    """The code-changing facts of one tensor argument (never its extents).

    Parameters
    ----------
    dtype
        Element type (canonical name, see `DTYPES`).
    ndim
        Rank.
    static_shape
        Per dim: an extent compiled into the kernel, or None for a dynamic one. Empty means all dynamic.
    stride_one
        Per dim: whether the stride is 1 (compiled in). Empty means none is.
    shape_div, stride_div
        Per dim: largest power-of-two divisor of the extent / stride in elements, capped at 16. Empty means 1.
    base_div
        Alignment of the base pointer in bytes, a power of two up to 16.
    index_dtype
        ``"i32"`` or ``"i64"``: the type of the shape and stride kernel parameters.
    """

    dtype: str
    ndim: int
    static_shape: tuple[int | None, ...] = ()
    stride_one: tuple[bool, ...] = ()
    shape_div: tuple[int, ...] = ()
    stride_div: tuple[int, ...] = ()
    base_div: int = DIV_CAP
    index_dtype: str = "i32"

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))
        if self.ndim < 0:
            raise SpecError(f"ArraySpec.ndim = {self.ndim} must be >= 0")
        for name, default in (("static_shape", None), ("stride_one", False), ("shape_div", 1), ("stride_div", 1)):
            value = tuple(getattr(self, name)) or (default,) * self.ndim
            if len(value) != self.ndim:
                raise SpecError(f"ArraySpec.{name} has {len(value)} entries for a rank-{self.ndim} array")
            object.__setattr__(self, name, value)
        for i, div in enumerate(self.shape_div + self.stride_div):
            _check_div(f"ArraySpec divisibility [{i}]", div)
        _check_div("ArraySpec.base_div", self.base_div)
        if self.index_dtype not in ("i32", "i64"):
            raise SpecError(f"ArraySpec.index_dtype = {self.index_dtype!r} must be 'i32' or 'i64'")

    @classmethod
    def of(
        cls,
        dtype: str,
        shape: Sequence[int],
        strides: Sequence[int],
        ptr: int = 0,
        *,
        static_dims: Iterable[int] = (),
        index_dtype: str = "i32",
        max_divisibility: int = DIV_CAP,
    ) -> ArraySpec:
        """Derive the facts of a concrete array (strides in elements, ``ptr`` its base address)."""
        if len(shape) != len(strides):
            raise SpecError(f"shape {tuple(shape)} and strides {tuple(strides)} differ in rank")
        static = set(static_dims)
        return cls(
            dtype=dtype,
            ndim=len(shape),
            static_shape=tuple(n if i in static else None for i, n in enumerate(shape)),
            stride_one=tuple(s == 1 for s in strides),
            shape_div=tuple(pow2_divisor(n, max_divisibility) for n in shape),
            stride_div=tuple(pow2_divisor(s, max_divisibility) for s in strides),
            base_div=pow2_divisor(ptr, max_divisibility),
            index_dtype=index_dtype,
        )

    @classmethod
    def contiguous(cls, dtype: str, ndim: int) -> ArraySpec:
        """The compile-only default: row-major (last stride 1), base 16-byte aligned, nothing else known."""
        return cls(dtype=dtype, ndim=ndim, stride_one=(False,) * (ndim - 1) + (True,) if ndim else ())

    @property
    def itemsize(self) -> int:
        """Bytes per element in memory."""
        return _ITEMSIZE[self.dtype]


@dataclass(frozen=True)
class ScalarSpec:
    """A runtime scalar argument: its dtype and, for integers and pointers, power-of-two divisibility."""

    dtype: str
    div: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))
        _check_div("ScalarSpec.div", self.div)


@dataclass(frozen=True)
class ByArch:
    """A value per GPU architecture, for an entry hint: ``tile.by_arch(sm_90=2, sm_100=16, default=1)``.

    A compile for ``sm_XX`` takes the ``sm_XX`` entry, else the ``default`` entry, else no hint at all. Entries are
    kept sorted, so equal tables hash and key alike.
    """

    table: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        table = tuple(sorted(dict(self.table).items()))
        if len(table) != len(self.table) or not table:
            raise SpecError(f"tile.by_arch needs at least one entry and each arch once, got {self.table!r}")
        for arch, value in table:
            if arch not in (*ARCHS, "default"):
                raise SpecError(f"tile.by_arch: unknown arch {arch!r}; use {', '.join(ARCHS)} or default")
            if type(value) is not int:
                raise SpecError(f"tile.by_arch({arch}={value!r}): hint values are ints")
        object.__setattr__(self, "table", table)

    def get(self, arch: str) -> int | None:
        """The value for ``arch`` (``"sm_90"``), the default entry where it has none, or None."""
        found = dict(self.table)
        return found.get(arch, found.get("default"))


def by_arch(**values: int) -> ByArch:
    """A per-architecture hint value: ``@tile.entry(occupancy=tile.by_arch(sm_90=2, sm_100=4, default=1))``."""
    return ByArch(tuple(values.items()))


Hint = int | ByArch | None
_HINTS: dict[str, tuple[Callable[[int], bool], str]] = {
    "occupancy": (lambda v: 1 <= v <= 32, "from 1 to 32"),
    "num_cta_in_cga": (lambda v: v in (1, 2, 4, 8, 16), "1, 2, 4, 8 or 16"),
    "num_worker_warps": (lambda v: v in (4, 8), "4 or 8"),
}


def hint_for(value: Hint, arch: str) -> int | None:
    """The hint value a compile for ``arch`` uses (None: no hint)."""
    return value.get(arch) if isinstance(value, ByArch) else value


@dataclass(frozen=True)
class CompileOptions:
    """User hints. ``opt_level`` and ``lineinfo`` go to tileiras; the rest become Tile IR optimisation hints.

    ``occupancy``, ``num_cta_in_cga`` and ``num_worker_warps`` are entry hints: an int, or a `ByArch` table whose
    entry for the target's arch is used. ``flush_to_zero`` and ``approx`` are the kernel's default math modes: every
    f32 op whose Tile IR op takes the mode gets it (flush subnormal inputs and results to zero; approximate
    division, square root, exp and tanh) unless the call gives its own (see ``tile.compiler._math_modes``).
    ``fp_contract`` (default on) fuses ``a * b + c`` / ``a * b - c`` into one ``fma`` where the product has no other
    use, as nvcc does by default (see ``tile.compiler._contract``); off keeps every product separately rounded.

    ``unchecked`` compiles the kernel as ``@tile.entry(unchecked=True)``: no index guards, raw pointers allowed. It is
    an option of one compilation (part of the specialization, so of every cache key), never a mark on the function:
    a checked and an unchecked kernel of one Python function get separate code.

    ``pdl`` compiles the kernel for programmatic dependent launch: its first op is Tile IR's ``gdc_wait_tko`` (PTX
    ``griddepcontrol.wait``: wait until the grids before it in the stream have completed and their writes are
    visible), and every memory access of the kernel is token-ordered after it, so the launcher may let the kernel
    *start* before its predecessor ends (``KernelABI.waits_prior_grid`` tells it so). Needs bytecode 13.4+.

    ``debug_guards`` makes the in-kernel tile-index guards device-side asserts on the GPU too: a failed guard then
    prints which access failed (the partition and the source line) before the launch ends, instead of a silent memory
    fault. Slower (an assert changes how ptxas compiles the whole kernel); for finding a fault, not for production.
    """

    opt_level: int = 3
    lineinfo: bool = True
    occupancy: Hint = None
    num_cta_in_cga: Hint = None
    num_worker_warps: Hint = None
    max_divisibility: int = DIV_CAP
    unchecked: bool = False
    debug_guards: bool = False
    flush_to_zero: bool = False
    approx: bool = False
    fp_contract: bool = True
    pdl: bool = False

    def __post_init__(self) -> None:
        for name in ("unchecked", "debug_guards", "flush_to_zero", "approx", "fp_contract", "pdl"):
            if not isinstance(getattr(self, name), bool):
                raise SpecError(f"CompileOptions.{name} = {getattr(self, name)!r} must be True or False")
        if self.opt_level not in range(4):
            raise SpecError(f"CompileOptions.opt_level = {self.opt_level} must be 0, 1, 2 or 3")
        for name, (ok, want) in _HINTS.items():
            value = getattr(self, name)
            values = dict(value.table).values() if isinstance(value, ByArch) else () if value is None else (value,)
            if any(type(v) is not int or not ok(v) for v in values):
                raise SpecError(f"CompileOptions.{name} = {value!r} must be {want} (an int, or tile.by_arch of them)")
        _check_div("CompileOptions.max_divisibility", self.max_divisibility)


def _sorted_items(mapping: Mapping[str, Any] | Iterable[tuple[str, Any]] | None) -> tuple[tuple[str, Any], ...]:
    items = dict(mapping.items() if isinstance(mapping, Mapping) else (mapping or ()))
    return tuple(sorted(items.items()))


@dataclass(frozen=True)
class Specialization:
    """Everything besides the source that decides a kernel's code. Build it with `Specialization.make`.

    ``own_grid`` (default): the kernel is launched on its outputs' own tile grid, one block per tile, as a launch
    without an explicit grid is. A ``for idx in z.tiles()`` walk then gives each block exactly one tile and compiles
    to a conditional body instead of a loop (tileiras pipelines a loop's loads across iterations with barriers and
    waits that a loop run once only pays for); on a larger grid the extra blocks do nothing, on a smaller one tiles
    stay unwritten. ``own_grid=False`` (what ``kernel.grid(g)`` launches use): the walk is a loop, right on any grid.
    """

    params: tuple[tuple[str, ArraySpec | ScalarSpec], ...] = ()
    consts: tuple[tuple[str, Const], ...] = ()
    dtypes: tuple[tuple[str, str], ...] = ()
    options: CompileOptions = field(default_factory=CompileOptions)
    own_grid: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _sorted_items(self.params))
        object.__setattr__(self, "consts", _sorted_items(self.consts))
        object.__setattr__(self, "dtypes", tuple((k, canonical_dtype(v)) for k, v in _sorted_items(self.dtypes)))
        for name, value in self.consts:
            if not isinstance(value, (int, float, bool)):
                raise SpecError(f"const {name} = {value!r} must be an int, float or bool")
        if not isinstance(self.own_grid, bool):
            raise SpecError(f"Specialization.own_grid = {self.own_grid!r} must be True or False")

    @classmethod
    def make(
        cls,
        params: Mapping[str, ArraySpec | ScalarSpec] | None = None,
        consts: Mapping[str, Const] | None = None,
        dtypes: Mapping[str, str] | None = None,
        options: CompileOptions | None = None,
        *,
        own_grid: bool = True,
    ) -> Specialization:
        """Build a specialization from plain mappings (order does not matter)."""
        items = (_sorted_items(params), _sorted_items(consts), _sorted_items(dtypes))
        return cls(*items, options or CompileOptions(), own_grid)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Specialization:
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def _identity(self) -> tuple[Any, ...]:
        """The fields compared, a const by its class and a float const by its bits: ``-0.0 == 0.0 == False`` and
        ``1 == 1.0 == True`` compile to different kernels, and a NaN const equals no other NaN."""
        consts = tuple((n, type(v), v.hex() if type(v) is float else v) for n, v in self.consts)
        return (self.params, consts, self.dtypes, self.options, self.own_grid)

    def param(self, name: str) -> ArraySpec | ScalarSpec | None:
        """The facts given for parameter ``name``, or None."""
        return dict(self.params).get(name)

    def const(self, name: str) -> Const | None:
        """The compile-time value of ``name``, or None."""
        return dict(self.consts).get(name)

    def dtype(self, name: str) -> str | None:
        """The dtype bound to generic ``name``, or None."""
        return dict(self.dtypes).get(name)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready description, stable across processes and Python versions."""
        params = {n: {"kind": type(p).__name__, **asdict(p)} for n, p in self.params}
        consts = {n: [type(v).__name__, v] for n, v in self.consts}
        found = {"params": params, "consts": consts, "dtypes": dict(self.dtypes), "options": asdict(self.options)}
        return found | {"own_grid": self.own_grid}

    def key(self) -> bytes:
        """Stable bytes identifying this specialization.

        The dataclass ``repr`` is exact here (every field is a str, bool, int, float, None or a tuple of those; bools
        and ints print differently) and several times faster than JSON, which matters at every launch.
        """
        return repr(self).encode()


@dataclass(frozen=True)
class Target:
    """The GPU architecture to compile for; `Target.cpu()` stops after bytecode (no tileiras, no cubin)."""

    arch: str = "sm_90"

    def __post_init__(self) -> None:
        arch = self.arch.strip().lower()
        if re.fullmatch(r"\d+", arch):
            arch = f"sm_{arch}"
        if arch not in (*ARCHS, _CPU):
            raise SpecError(
                f"unknown target arch {self.arch!r}: Tile IR targets {', '.join(ARCHS)} (sm_80 and newer), or 'cpu'"
            )
        object.__setattr__(self, "arch", arch)

    @classmethod
    def for_device(cls, ordinal: int = 0) -> Target:
        """The target of CUDA device ``ordinal`` (asks the driver; raises `SpecError` for a GPU older than sm_80)."""
        from tile.bindings import compute_capability

        major, minor = compute_capability(ordinal)
        return cls(f"sm_{major}{minor}")

    @classmethod
    def cpu(cls) -> Target:
        """The CPU stub target: the pipeline stops after bytecode."""
        return cls(_CPU)

    @property
    def is_cpu(self) -> bool:
        """True for the CPU stub target."""
        return self.arch == _CPU

    @property
    def sm(self) -> int:
        """The SM number (90 for sm_90; 0 for the CPU stub)."""
        return 0 if self.is_cpu else int(self.arch[3:])

    def key(self) -> bytes:
        """Stable bytes identifying the target."""
        return self.arch.encode()

    def __str__(self) -> str:
        return self.arch


@dataclass(frozen=True)
class AbiSlot:
    """One real kernel parameter: which Python parameter it comes from, its role, axis and Tile IR dtype."""

    param: str
    role: str
    axis: int
    dtype: str


@dataclass(frozen=True)
class KernelABI:
    """The entry symbol and the exact kernel parameter list the launcher packs, in order."""

    entry: str
    slots: tuple[AbiSlot, ...] = ()
    # Index checks the kernel leaves to the launcher (see `tile.compiler.HostGuard`): a launch whose extents or grid
    # fail one would index outside a partition, so a launcher must check them (`failed_guard`) before launching.
    guards: tuple[HostGuard, ...] = ()
    # How each Mut output is addressed, as the type checker found it: ``(name, "own")`` when blocks access the tile
    # at their block id (the grid must be the output's tile grid, one block per tile) and ``(name, "tiles")`` when
    # they walk ``z.tiles()`` (every tile goes to one block whatever the grid). An output neither stored nor loaded
    # is ``"own"``: the strict default, also for ABIs written before this field existed.
    outputs: tuple[tuple[str, str], ...] = ()
    # True when the kernel's first op waits for the grids before it (``CompileOptions.pdl``) and every memory access
    # is ordered after that wait: only then may a launcher launch it with programmatic stream serialization (PDL),
    # which lets it start while its predecessor still runs. False for ABIs written before this field existed.
    waits_prior_grid: bool = False
    # The tile shape the code was compiled for, per ``Mut`` output (a tuple parameter's elements as ``name[i]``), in
    # parameter order. The code's own-tile, ``subtiles`` and ``tiles()`` addressing all assume it, so a launcher must
    # check that each partition it passes has exactly this tile shape (`tile_of`); a disagreement is a bug in Tile.
    # Required when read back (`from_json`): an entry written before this field existed is not trusted, but rebuilt.
    tiles: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # The extents compiled into the code as constants (None: read from the shape slot), per tensor parameter that has
    # any: the code indexes by them, so a launcher must check that the tensor it passes has them. Required as ``tiles``.
    static_extents: tuple[tuple[str, tuple[int | None, ...]], ...] = ()

    def tile_of(self, param: str) -> tuple[int, ...] | None:
        """The tile shape output ``param``'s code was compiled for, or None when the code takes it as no output."""
        for name, shape in self.tiles:
            if name == param:
                return shape
        return None

    def walks_tiles(self, param: str) -> bool:
        """True when output ``param`` is addressed only through ``param.tiles()``: any launch grid is race-free."""
        return (param, "tiles") in self.outputs

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready description (inverse of `from_json`)."""
        return {
            "entry": self.entry,
            "slots": [[getattr(s, f.name) for f in fields(AbiSlot)] for s in self.slots],
            "guards": [g.to_json() for g in self.guards],
            "outputs": [list(o) for o in self.outputs],
            "waits_prior_grid": self.waits_prior_grid,
            "tiles": [[name, list(shape)] for name, shape in self.tiles],
            "static_extents": [[name, list(dims)] for name, dims in self.static_extents],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KernelABI:
        """Rebuild an ABI written by `to_json` (a `KeyError` without ``tiles`` or ``static_extents``: written before
        them, so not to be trusted)."""
        tiles = tuple((str(name), tuple(int(d) for d in shape)) for name, shape in data["tiles"])
        static = tuple(
            (str(name), tuple(None if d is None else int(d) for d in dims)) for name, dims in data["static_extents"]
        )
        slots = tuple(AbiSlot(str(p), str(r), int(a), str(d)) for p, r, a, d in data["slots"])
        guards = tuple(HostGuard.from_json(g) for g in data.get("guards", ()))
        outputs = tuple((str(name), str(mode)) for name, mode in data.get("outputs", ()))
        pdl = data.get("waits_prior_grid", False) is True
        return cls(str(data["entry"]), slots, guards, outputs, pdl, tiles, static)
