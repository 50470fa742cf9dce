"""Random scalar programs with if/else, for (with break/continue), while and early return compile, run in tile.ir's
interpreter and compute what the same code computes as plain Python (variables carried through every construct)."""

from __future__ import annotations

import importlib.util
import itertools
import re
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tile.compiler._lower import lower
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import Specialization, Target
from tile.compiler._typecheck import typecheck
from tile.ir import interp  # a declared dependency (tile-ir[interp]): missing, it must fail, not skip

VARS = ("a", "b", "c")
_counter = itertools.count()
_DIR = Path(tempfile.mkdtemp(prefix="tile_flow_fuzz_"))


@pytest.fixture(scope="module", autouse=True)
def _remove_the_kernel_files() -> Iterator[None]:
    """The generated kernel sources stay in _DIR while the module runs (diagnostics read them), then go."""
    yield
    shutil.rmtree(_DIR, ignore_errors=True)


atoms = st.one_of(st.sampled_from([*VARS, "bid", "n"]), st.integers(-3, 5).map(str))
exprs = st.tuples(atoms, st.sampled_from(["+", "-"]), atoms).map(lambda t: f"{t[0]} {t[1]} {t[2]}") | atoms
conds = st.tuples(atoms, st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), atoms).map(" ".join)
conds = conds | st.tuples(conds, st.sampled_from(["and", "or"]), conds).map(" ".join)


def _block(depth: int, in_loop: bool) -> st.SearchStrategy[list[str]]:
    assign = st.tuples(st.sampled_from(VARS), st.sampled_from(["=", "+=", "-="]), exprs).map(
        lambda t: [f"{t[0]} {t[1]} {t[2]}"]
    )
    options: list[st.SearchStrategy[list[str]]] = [assign]
    if in_loop:
        options.append(conds.map(lambda c: [f"if {c}:", "    break"]))
        options.append(conds.map(lambda c: [f"if {c}:", "    continue"]))
    if depth > 0:
        inner = _block(depth - 1, in_loop)
        options.append(st.tuples(conds, inner, inner).map(lambda t: [f"if {t[0]}:", *_ind(t[1]), "else:", *_ind(t[2])]))
        loop_body = _block(depth - 1, True)
        bound = st.sampled_from(["3", "n", "range(1, 5, 2)"])
        options.append(
            st.tuples(bound, loop_body).map(
                lambda t: [f"for _i{depth} in {t[0] if t[0].startswith('range') else f'range({t[0]})'}:", *_ind(t[1])]
            )
        )
        options.append(
            st.tuples(conds, loop_body).map(
                lambda t: [
                    f"w{depth} = 0",
                    f"while w{depth} < 4:",
                    f"    w{depth} += 1",
                    *_ind(t[1]),
                ]
            )
        )
    return st.lists(st.one_of(*options), min_size=1, max_size=3).map(lambda blocks: [s for b in blocks for s in b])


def _ind(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


programs = st.tuples(_block(2, False), st.booleans(), conds)

_KERNEL = """
import tile.compiler.lang as tile
from tile.compiler.lang import Mut, Tensor, i32


def flow(z: Mut[Tensor[i32, "B"]], n: int):
    bid = tile.block_id()[0]
    a, b, c = 0, 1, 2
{early}
{body}
    z.store(tile.zeros((B,), i32) + (a * 10000 + b * 100 + c))


def _w(v):
    return (v + 2**31) % 2**32 - 2**31


def twin(bid, n):
    a, b, c = 0, 1, 2
{early_py}
{twin_body}
    return _w(a * 10000 + b * 100 + c)
"""
_ASSIGN = re.compile(r"^(\s*)([abc]) (=|\+=|-=) (.*)$")


def _wrapped(line: str) -> str:
    """The twin's statement with int32 wrap-around, as the kernel computes (only + and - occur)."""
    m = _ASSIGN.match(line)
    if m is None:
        return line
    pad, var, op, rhs = m.groups()
    value = rhs if op == "=" else f"{var} {op[0]} ({rhs})"
    return f"{pad}{var} = _w({value})"


def _module(body: list[str], early: str | None) -> Any:
    path = _DIR / f"tile_flow_{next(_counter)}.py"
    text = _KERNEL.format(
        body=textwrap.indent("\n".join(body), "    "),
        twin_body=textwrap.indent("\n".join(map(_wrapped, body)), "    "),
        early=f"    if {early}:\n        return" if early else "",
        early_py=f"    if {early}:\n        return None" if early else "",
    )
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@example((["for _i1 in range(n):", "    if a > 1:", "        break", "    a += 1"], False, "a < 0"), 4)
@example(
    (["w1 = 0", "while w1 < 4:", "    w1 += 1", "    if b == 2:", "        continue", "    b += c"], True, "bid == 1"),
    2,
)
@given(programs, st.integers(0, 4))
def test_random_control_flow_matches_python(program: tuple[list[str], bool, str], n: int) -> None:
    body, with_early, early = program
    module = _module(body, early if with_early else None)
    blocks, width = 3, 16
    z = np.full(blocks * width, -99, np.int32)
    target = Target("sm_90")
    typed = typecheck(resolve(parse(module.flow)), Specialization.make(consts={"B": width}), target)
    interp.launch(lower(typed, target).module, (blocks,), [z, z.shape[0], 1, n])
    for bid in range(blocks):
        want = module.twin(bid, n)
        got = z[bid * width : (bid + 1) * width]
        assert (got == (-99 if want is None else want)).all(), (bid, got[0], want, "\n".join(body))
