"""The hit test and launch of a `tile.core._plan.LaunchPlan`, generated as straight-line code for one signature.

A checked launch that repeats its last arguments spends most of its host time deciding that it may reuse the plan;
a loop or ``map`` over the arguments costs several times more per launch than one ``is`` per argument written out,
so the code is generated per signature (as ``dataclasses`` and ``attrs`` make their methods): the source names
argument positions only, and every value it tests is read from the plan or bound in its namespace.

Invariants (the ones `tile.core._plan` states, in this order): the arguments are an exact list or tuple of the
signature's length (unpacking runs no user code); the float kinds' converters run first (they may run a value's own
methods: ``__float__`` may free memory or close a stream), and a refusal sends the launch down the full path; then no
user code runs (but a finalizer may, at an allocation): the epoch, stream and ``busy`` guards, after which the plan is
claimed (``busy``) until the driver call returns, so a finalizer's launch takes the full path and leaves the block
alone; each pointer argument the remembered object itself (``is`` on its weak reference's referent: a collected one
is None, never another object, and a None argument never matches), each scalar the very object whose value the cells
hold (``plan._last``, held by the plan) or, else, of its exact type and packed now (``struct`` range-checks ints);
then the driver call.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from tile.core._errors import LaunchArgumentError
from tile.core._stream import invalidation

__all__ = ["launcher"]

# ``launch(plan, args, stream, driver, shared_mem, gx, gy, gz, bx, by, bz)``: the driver's result, or None with nothing
# launched (the caller then takes the full path).
Launcher = Callable[..., Any]


def launcher(
    pointers: tuple[int, ...],
    scalars: tuple[int, ...],
    converters: dict[int, Callable[[Any], Any]],
    types: dict[int, type],
) -> Launcher:
    """The plan launch for a signature with pointer parameters at ``pointers``, scalars at ``scalars`` (of exact
    ``types``), and the float scalars at the keys of ``converters`` converted first."""
    n = len(pointers) + len(scalars)
    a = [f"a{i}" for i in range(n)]
    lines = [
        "def launch(plan, args, stream, driver, shared_mem, gx, gy, gz, bx, by, bz):",
        f"    if (kind := type(args)) is not list and kind is not tuple or len(args) != {n}:",
        "        return None",
    ]
    if n:
        lines.append(f"    {_names(a)} = args")
    if converters:
        lines.append("    try:")
        lines += [f"        a{i} = c{i}(a{i})" for i in sorted(converters)]
        lines += ["    except LaunchArgumentError:", "        return None"]
    lines += [
        "    if plan.epoch != invalidation[0] or plan.stream() is not stream or plan.busy:",
        "        return None",
        # Claimed until the driver has read the block: a launch made meanwhile (a finalizer the collector runs at an
        # allocation below) takes the full path, which neither packs nor remembers into a busy plan's block.
        "    plan.busy = True",
        "    try:",
    ]
    body: list[str] = []
    if pointers:
        body.append(f"    {_names([f'r{i}' for i in pointers])} = plan._refs")
        # (a collected referent reads None: None passed for it must not match)
        body.append(f"    if {' or '.join(f'a{i} is None or a{i} is not r{i}()' for i in pointers)}:")
        body.append("        return None")
    if scalars:
        values = _names([f"a{i}" for i in scalars])
        body += [
            "    last = plan._last",
            "    if last is not None:",
            f"        {_names([f's{i}' for i in scalars])} = last",
            f"    if last is None or {' or '.join(f'a{i} is not s{i}' for i in scalars)}:",
            f"        if {' or '.join(f'type(a{i}) is not t{i}' for i in scalars)}:",
            "            return None",
            # A refused pack may have written cells before the bad value: no object may stand for them until one passes.
            "        plan._last = None",
            "        try:",
            f"            plan._scalar_cells.pack_into(plan.block, 0, {values})",
            "        except struct_error:  # an int out of its kind's range: the full path says which",
            "            return None",
            f"        plan._last = ({values})",
        ]
    body += [
        "    if plan.driver is not driver:  # (read once per driver: a simulator's attribute reads are slow)",
        "        plan.driver, plan.driver_launch = driver, driver.cuLaunchKernel",
        "    return plan.driver_launch(plan.kernel, gx, gy, gz, bx, by, bz, shared_mem, stream._raw, plan.address, 0)",
    ]
    lines += ["    " + line for line in body]
    lines += ["    finally:", "        plan.busy = False"]
    namespace: dict[str, Any] = {
        "LaunchArgumentError": LaunchArgumentError,
        "invalidation": invalidation,
        "struct_error": struct.error,
        **{f"c{i}": convert for i, convert in converters.items()},
        **{f"t{i}": kind for i, kind in types.items()},
    }
    source = "\n".join(lines)
    exec(compile(source, f"<tile.core launch plan of {n} parameters>", "exec"), namespace)  # source: see above
    launch: Launcher = namespace["launch"]
    return launch


def _names(names: list[str]) -> str:
    """A target or tuple display of ``names`` that is a tuple for one name too (``a0,``)."""
    return ", ".join(names) + ("," if len(names) == 1 else "")
