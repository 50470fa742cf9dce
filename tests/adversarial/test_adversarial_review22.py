"""Review 22: an adversarial look, from safe code only, at the decisions cached across calls that were merged last:
tile.core's checked-launch plan (``tile.core._plan.LaunchPlan``), and tile.frontend's call sites cached by (code
object, ``f_lasti``) and its one-hold release of a ``.then()`` chain (``_fastlaunch.release_links``). Each hole's test
names it and failed before its fix.

Holes found and fixed:

- A planned launch whose scalars ``struct`` refused (an int out of its kind's range, the full path then raising
  `LaunchArgumentError`) had already packed the scalars before the bad one into the reusable block, and left the
  ids of the last planned launch's arguments remembered: relaunching those very objects matched the ids and sent the
  half-overwritten cells, values the user never passed for this launch (a length of the refused call: the simulated
  kernel wrote past its buffer). A refused pack now forgets the ids.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tile.core as tc
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver


def _floats(n: int, value: float = 0.0) -> tc.DeviceBuffer:
    return tc.DeviceBuffer.from_host(np.full(n, value, np.float32))


# -- hole: a refused pack left the last launch's ids remembered over half-written cells ------------------------------


def test_a_pack_refused_midway_does_not_leave_its_cells_for_the_last_launchs_objects(
    sim: SimDriver, vec_add: tc.Function
) -> None:
    """Hole: ``struct`` packs the cells in order, so a refused ``sz`` left the refused call's ``nz`` (128) in the
    block; the ids of the last planned launch's arguments were still remembered, so relaunching those objects sent
    nz=128 for a 32-element ``z`` (written past its end)."""
    x, y, z = _floats(32, 1.0), _floats(32, 2.0), _floats(32)
    args: list[Any] = [x, 32, 1, y, 32, 1, z, 32, 1]
    for _ in range(2):  # the full path remembers the pointers; the planned launch remembers the arguments' ids
        tc.launch(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE)
    refused = [x, 32, 1, y, 32, 1, z, 128, 2**40]
    with pytest.raises(tc.LaunchArgumentError, match=r"does not fit an i32 parameter"):
        tc.launch(vec_add, 1, 1, refused, signature=VEC_ADD_SIGNATURE)
    seen: list[tuple[int, ...]] = []
    kernel = sim.kernels["vec_add"]
    body = kernel.body

    def spy(values: tuple[int, ...], grid: tuple[int, int, int]) -> Any:
        seen.append(values)
        return body(values, grid)

    kernel.body = spy
    try:
        tc.launch(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE)
    finally:
        kernel.body = body
    assert [v[1:] for v in (seen[0][0:3], seen[0][3:6], seen[0][6:9])] == [(32, 1)] * 3
    out = np.zeros(32, np.float32)
    z.copy_to(out)
    assert (out == 3.0).all()
    for buffer in (x, y, z):
        buffer.free()
