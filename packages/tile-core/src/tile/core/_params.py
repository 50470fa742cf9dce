"""The parameter block a launch hands ``cuLaunchKernel``: one 8-byte cell per checked argument, and the ``void*``
array pointing at the cells.

Invariants: only values `tile.core._args` checked reach a block (kinds and values from `pack_args` or
`pack_launch`); a block's layout is cached per kind tuple; the caller keeps the block alive while its address is used.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tile.core._args import PackedArgs

__all__ = ["CELL", "kernel_params", "param_block"]

# Each argument sits in its own 8-byte cell of one block, as the C value the driver copies (``size`` bytes from the
# cell's address): the struct code per kind, padded to 8 bytes; 16-bit floats as IEEE half ('e') or as their bits.
CELL = {
    "ptr": "Q",
    "cptr": "Q",
    "i8": "b7x",
    "i16": "h6x",
    "u8": "B7x",
    "u16": "H6x",
    "i32": "i4x",
    "i64": "q",
    "u32": "I4x",
    "u64": "Q",
    "f16": "e6x",
    "bf16": "H6x",
    "f32": "f4x",
    "f64": "d",
}
_BLOCKS: dict[tuple[str, ...], tuple[Any, str, str]] = {}


def kernel_params(packed: PackedArgs) -> tuple[object, int]:
    """``cuLaunchKernel``'s ``kernelParams`` for packed arguments: the address of a ``void*`` array pointing at one
    cell per argument, and the block that holds both (keep it alive as long as the address is used)."""
    return param_block(packed.kinds, packed.values)


def param_block(kinds: tuple[str, ...], values: Sequence[Any]) -> tuple[object, int]:
    """`kernel_params` of checked kinds and values (from `pack_args` or `pack_launch`)."""
    n = len(kinds)
    layout = _BLOCKS.get(kinds)
    if layout is None:
        cells = "<" + "".join(CELL[kind] for kind in kinds)
        layout = _BLOCKS[kinds] = (ctypes.c_uint64 * (2 * n or 1), cells, f"<{n}Q")
    block_type, cells, pointers = layout
    block = block_type()
    base = ctypes.addressof(block)
    struct.pack_into(cells, block, 0, *values)
    struct.pack_into(pointers, block, 8 * n, *range(base, base + 8 * n, 8))
    return block, base + 8 * n
