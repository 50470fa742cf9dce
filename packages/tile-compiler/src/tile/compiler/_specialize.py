"""The specialization of a kernel call, derived from its tensors' shapes, strides and base addresses.

Invariant: `specialize` computes exactly what tile.frontend's launcher computes for tensors of the same shapes,
strides and alignment (static dims from the annotation, i64 indices past the i32 range, a `ScalarSpec` per runtime
scalar), so ``tile compile --shape`` ahead of time fills the disk cache under the key a launch will look up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ._spec import DIV_CAP, ArraySpec, CompileOptions, ScalarSpec, SpecError, Specialization, canonical_dtype

__all__ = ["row_major", "specialize"]

_I32_MAX = 2**31 - 1


def specialize(
    fn: Callable[..., object],
    shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    strides: Mapping[str, Sequence[int]] | None = None,
    pointers: Mapping[str, int] | None = None,
    consts: Mapping[str, int | float | bool] | None = None,
    dtypes: Mapping[str, str] | None = None,
    options: CompileOptions | None = None,
    own_grid: bool = True,
) -> Specialization:
    """Derive the `Specialization` of a call of kernel ``fn``.

    Parameters
    ----------
    fn
        The kernel.
    shapes
        Extents per tensor parameter (the whole tensor for ``Mut`` outputs); an element of a tuple parameter is
        named ``name[i]`` (its length given as ``consts[name]``). Tensors left out take the annotation's defaults
        (nothing known), as a launch never does: give every tensor to match a launch.
    strides
        Strides in elements per tensor parameter (default: row-major contiguous).
    pointers
        Base addresses (default 0: aligned like every device allocation).
    consts, dtypes, options, own_grid
        As in `Specialization.make` (``own_grid=False`` for a launch with an explicit grid, ``kernel.grid(g)``).

    Returns
    -------
    Specialization
        Equal to the one a launch with such tensors computes.
    """
    from ._parse import parse
    from ._resolve import resolve

    info = {p.name: p for p in resolve(parse(fn)).params}
    for p in [p for p in info.values() if p.kind == "tuple"]:  # a tuple's elements, given its length in ``consts``
        count = (consts or {}).get(p.name)
        info |= {e.name: e for e in p.elements(count)} if type(count) is int and count > 0 else {}
    cap = options.max_divisibility if options else DIV_CAP
    params: dict[str, ArraySpec | ScalarSpec] = {}
    for p in info.values():
        if p.kind in ("scalar", "ptr") and p.dtype is not None:
            dtype = canonical_dtype(p.dtype.name)
            params[p.name] = ScalarSpec(f"ptr<{dtype}>" if p.kind == "ptr" else dtype)
    for name, shape in (shapes or {}).items():
        t = info.get(name)
        if t is None or t.kind not in ("tensor", "mut") or t.dtype is None:
            raise SpecError(f"{getattr(fn, '__name__', fn)!r} has no tensor parameter {name!r}; it has {sorted(info)}")
        steps = tuple((strides or {}).get(name) or row_major(shape))
        reach = sum((n - 1) * s for n, s in zip(shape, steps, strict=False))
        wide = max((*shape, *steps, reach), default=0) > _I32_MAX
        params[name] = ArraySpec.of(
            (dtypes or {}).get(name, t.dtype.name),
            shape,
            steps,
            (pointers or {}).get(name, 0),
            static_dims=[i for i, item in enumerate(t.shape) if item != -1] if t.kind == "tensor" else [],
            index_dtype="i64" if wide else "i32",
            max_divisibility=cap,
        )
    return Specialization.make(params, consts, dtypes, options, own_grid=own_grid)


def row_major(shape: Sequence[int]) -> tuple[int, ...]:
    """Strides in elements of a C-contiguous array of ``shape``."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))
