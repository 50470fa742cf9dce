"""Validation of optimization hints (tileiras silently accepts unknown keys and out-of-range values).

Entry hints: ``num_cta_in_cga`` (power of two <= 16), ``occupancy`` (1..32), ``num_worker_warps_per_cta``
(4 or 8, 13.3+). View loads/stores: ``allow_tma`` (bool), ``latency`` (1..10). Pointer loads/stores:
``latency``. Architecture keys: ``sm_80 sm_86 sm_87 sm_88 sm_89 sm_90 sm_100 sm_103 sm_110 sm_120 sm_121``
and ``default`` (13.3+).
"""

from __future__ import annotations

from collections.abc import Callable

from tile.ir._attrs import Attr, BoolAttr, IntegerAttr, OptimizationHints
from tile.ir._version import V13_1, V13_3, Version

__all__ = ["ARCH_KEYS", "hint_problems"]

ARCH_KEYS = ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121")

_Check = tuple[Version, Callable[[Attr], bool], str]


def _int_in(lo: int, hi: int) -> Callable[[Attr], bool]:
    return lambda a: isinstance(a, IntegerAttr) and lo <= a.value <= hi


def _is_pow2_upto_16(a: Attr) -> bool:
    return isinstance(a, IntegerAttr) and a.value in (1, 2, 4, 8, 16)


_ENTRY: dict[str, _Check] = {
    "num_cta_in_cga": (V13_1, _is_pow2_upto_16, "a power of two from 1 to 16"),
    "occupancy": (V13_1, _int_in(1, 32), "an integer from 1 to 32"),
    "num_worker_warps_per_cta": (V13_3, lambda a: isinstance(a, IntegerAttr) and a.value in (4, 8), "4 or 8"),
}
_LATENCY: _Check = (V13_1, _int_in(1, 10), "an integer from 1 to 10")
_VIEW: dict[str, _Check] = {"allow_tma": (V13_1, lambda a: isinstance(a, BoolAttr), "a bool"), "latency": _LATENCY}
_PTR: dict[str, _Check] = {"latency": _LATENCY}
KINDS: dict[str, dict[str, _Check]] = {"entry": _ENTRY, "view": _VIEW, "pointer": _PTR}


def hint_problems(hints: OptimizationHints, kind: str, version: Version) -> list[str]:
    """Return one message per invalid arch key, hint name or value (`kind`: entry, view or pointer)."""
    allowed = KINDS[kind]
    problems = []
    seen: set[str] = set()
    for arch, table in hints.by_arch:
        if arch in seen:
            problems.append(f"architecture key {arch!r} appears twice")
        seen.add(arch)
        if arch == "default" and version < V13_3:
            problems.append("the 'default' hints key needs bytecode 13.3+; name an architecture such as 'sm_90'")
        elif arch != "default" and arch not in ARCH_KEYS:
            problems.append(f"unknown architecture key {arch!r}; use one of {', '.join(ARCH_KEYS)} or 'default'")
        for name, value in table.items:
            problems += _check_one(allowed, arch, name, value, version)
    return problems


def _check_one(allowed: dict[str, _Check], arch: str, name: str, value: Attr, version: Version) -> list[str]:
    check = allowed.get(name)
    if check is None:
        return [f"unknown hint {name!r} under {arch!r}; valid hints here are {', '.join(allowed)}"]
    since, ok, want = check
    if version < since:
        return [f"hint {name!r} needs bytecode {since}+"]
    if not ok(value):
        return [f"hint {name}={value!r} under {arch!r} must be {want}"]
    return []
