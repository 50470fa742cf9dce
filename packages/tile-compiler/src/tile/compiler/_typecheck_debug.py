"""Kernel-language rules for the debugging ops: ``tile.print`` and ``tile.printf`` (the device's vprintf, every
literal ``%`` escaped), ``tile.assert_`` (checked at run time) and ``tile.static_assert`` (at compile time); and the
launch-control hint ``tile.launch_dependents`` (Tile IR ``gdc_launch_dependents_tko``, bytecode 13.4+).
"""

from __future__ import annotations

from typing import Any

from tile.compiler._kir import Value
from tile.compiler._printf import escape, format_problem
from tile.compiler._typecheck_arith import F32, I1, is_const
from tile.compiler._typecheck_raw import RawMixin
from tile.compiler._types import DType, TokenType
from tile.compiler.lang._ops import LangOp

__all__ = ["DebugMixin"]

_PRINTF = {"b": "%d", "i": "%d", "u": "%u", "f": "%f"}


class DebugMixin(RawMixin):
    """``tile.print``, ``tile.printf``, ``tile.assert_``, ``tile.static_assert`` and ``tile.launch_dependents``."""

    bytecode_version: tuple[int, int] | None = None  # the version the kernel is written at (None: the newest)

    def require_version(self, needed: tuple[int, int], what: str) -> None:
        """Fail at the current node when the kernel is written at a bytecode version older than ``needed``."""
        have = self.bytecode_version
        if have is not None and have < needed:
            self.fail(
                f"{what} needs Tile IR bytecode {needed[0]}.{needed[1]} or newer, but this kernel is written at "
                f"{have[0]}.{have[1]}; unset TILE_BYTECODE_VERSION (or --bytecode-version) or set it to "
                f"{needed[0]}.{needed[1]}+, with an nvidia-cuda-tileiras that reads it"
            )

    def _print(self, fmt: str, values: list[Value]) -> None:
        self.em.emit("print_tko", [values, None], [TokenType()], {"str": fmt})

    def op_print(self, op: LangOp, a: dict[str, Any]) -> object:
        parts: list[str] = []
        values: list[Value] = []
        for arg in a["args"]:
            if isinstance(arg, str) or is_const(arg) or arg is None:
                parts.append(escape(str(arg)))
                continue
            t = self.tile_of(arg, "printed value")
            if not isinstance(t.elem, DType):
                self.fail("pointer tiles cannot be printed")
            wide = t.elem.is_float and t.elem.name not in ("f32", "f64")
            parts.append("%ld" if t.elem.bits == 64 and t.elem.is_int else _PRINTF[t.elem.kind])
            values.append(self.convert(arg, F32) if wide else arg)
        # sep and end are literal text too: a '%' in them would be a conversion vprintf honours (see _printf)
        self._print(escape(str(a["sep"])).join(parts) + escape(str(a["end"])), values)
        return None

    def op_printf(self, op: LangOp, a: dict[str, Any]) -> object:
        if not isinstance(a["fmt"], str):
            self.fail("the format of tile.printf must be a string literal")
        values = []
        for v in a["args"]:
            val = self.as_tile(v, what="printf argument")
            t = self.tile_of(val)
            if not isinstance(t.elem, DType):
                self.fail("pointer tiles cannot be printed")
            wide = t.elem.is_float and t.elem.name not in ("f32", "f64")  # as tile.print does
            values.append(self.convert(val, F32) if wide else val)
        problem = format_problem(a["fmt"], [self.tile_of(v).dtype for v in values])
        if problem is not None:
            self.fail(f"tile.printf: {problem}")
        self._print(a["fmt"], values)
        return None

    def op_assert(self, op: LangOp, a: dict[str, Any]) -> object:
        if not isinstance(a["msg"], str):
            self.fail("the message of tile.assert_ must be a string literal")
        cond = self.as_tile(a["cond"], I1 if is_const(a["cond"]) else None, "assert condition")
        if self.tile_of(cond).elem != I1:
            self.fail("the condition of tile.assert_ must be a bool (a comparison)")
        self.em.emit("assert", [cond], [], {"message": a["msg"]})
        return None

    def op_launch_dependents(self, op: LangOp, a: dict[str, Any]) -> object:
        # A hint only: it lets a successor launched with programmatic stream serialization start (its own entry wait
        # still waits for this whole grid to complete), so it needs no ordering and no pdl option of its own.
        self.require_version((13, 4), "tile.launch_dependents (gdc_launch_dependents_tko)")
        self.em.emit("gdc_launch_dependents_tko", [None], [TokenType()])
        return None

    def op_static_assert(self, op: LangOp, a: dict[str, Any]) -> object:
        if not is_const(a["cond"]):
            self.fail("tile.static_assert needs a compile-time condition; use tile.assert_ for run-time checks")
        if not a["cond"]:
            self.fail(f"static assertion failed{': ' + str(a['msg']) if a['msg'] else ''}")
        return None
