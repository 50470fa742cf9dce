"""An ``assert``'s message and file names reach the device as ``printf`` format text (tileiras copies both into a
``vprintf`` format; see ``tile.ir._format_text``): lowering escapes every ``%`` of a ``tile.assert_`` message, of the
compiler's own guard messages and of the kernel's file path, so no text of the user's can act as a conversion; the
CPU interpreter prints the text as written, as the device does."""

from __future__ import annotations

import importlib.util
import re
from typing import Any

import numpy as np
import pytest

from tile import ir
from tile.compiler._lower import lower
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import Specialization, Target
from tile.compiler._typecheck import typecheck
from tile.ir import interp

SOURCE = """
import tile.compiler.lang as tile
from tile.compiler.lang import Mut, Tensor, f32


def user_assert(z: Mut[Tensor[f32, "B"]]):
    tile.assert_(tile.block_id()[0] < 1, "100% %s%n%*d")
    z.store(tile.zeros((B,), f32))


def guarded(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.partition((B,)).load((tile.block_id()[0] + 1,)))
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The kernels above, in a file whose folder name holds conversions."""
    folder = tmp_path_factory.mktemp("assert_text") / "p%s%n dir"
    folder.mkdir()
    path = folder / "pct_kernels.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("pct_kernels", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lowered(fn: Any, target: Target, **consts: Any) -> ir.Module:
    return lower(typecheck(resolve(parse(fn)), Specialization.make(consts=consts), target), target).module


def asserts(module: ir.Module) -> list[ir.Operation]:
    return [op for op in module.functions[0].walk() if op.name == "assert"]


def filenames(loc: ir.Location | None) -> list[str]:
    if isinstance(loc, ir.DILoc):
        return [loc.filename]
    return filenames(loc.callee) + filenames(loc.caller) if isinstance(loc, ir.CallSite) else []


def test_a_user_message_is_written_with_every_percent_doubled(kernels: Any) -> None:
    module = lowered(kernels.user_assert, Target("sm_90"), B=16)
    (op,) = asserts(module)
    assert op.attributes["message"] == "100%% %%s%%n%%*d"
    (name,) = filenames(op.loc)
    assert name.endswith("/p%%s%%n dir/pct_kernels.py")
    other = [f for o in module.functions[0].walk() if o.name != "assert" for f in filenames(o.loc)]
    assert other  # debug info keeps the real path
    assert all(f.endswith("/p%s%n dir/pct_kernels.py") for f in other)
    ir.verify(module, ir.V13_3)


def test_the_interpreter_reports_the_message_and_path_as_written(kernels: Any) -> None:
    module = lowered(kernels.user_assert, Target.cpu(), B=16)
    z = np.zeros(32, np.float32)
    interp.launch(module, (1,), [z, 32, 1])  # block 0 passes
    pattern = re.escape("kernel assertion failed: 100% %s%n%*d (at ") + r"\S*/p%s%n dir/pct_kernels\.py:7:"
    with pytest.raises(interp.KernelAssertionError, match=pattern) as info:
        interp.launch(module, (2,), [z, 32, 1])
    assert "%%" not in str(info.value)


def test_guard_messages_naming_the_path_are_escaped(kernels: Any) -> None:
    module = lowered(kernels.guarded, Target.cpu(), B=16)
    (op,) = asserts(module)
    message = str(op.attributes["message"])
    assert message.startswith("tile index out of range for x.partition((16,)) at ")
    assert "/p%%s%%n dir/pct_kernels.py:" in message
    assert ir.format_text_problem(message, "the guard") is None
    ir.verify(module, ir.V13_3)
    z, x = np.zeros(64, np.float32), np.arange(64, dtype=np.float32)
    with pytest.raises(interp.KernelAssertionError, match=r"tile index out of range .* at \S*/p%s%n dir/pct_kernels"):
        interp.launch(module, (4,), [z, 64, 1, x, 64, 1])
