"""Seeded mutations of real bytecode files: only `BytecodeError` and `VerifyError` escape read -> verify -> print.

The corpus is every cuTile Python export of `cutile_corpus` (the peer's bytecode, 13.3 and 13.5), every builder op
sample at each supported version and tile-core's checked-in ``vec_add.tileirbc``. CI runs 3,000 mutations (a few
seconds); ``TILE_FUZZ_MUTATIONS=100000`` runs the issue's 100,000 (``-m fuzz`` selects only these tests), and
``TILE_FUZZ_SEED`` picks another seed. Every input must also finish within a second. A third as many read modules
are damaged the way builder code can (`fuzz_ir`): verify and print them raise only `VerifyError`.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_mutate import corpus, fuzz, fuzz_ir, mutate
from helpers_ir_samples import build_sample
from tile.ir import (
    V13_4,
    BytecodeError,
    DenseElementsAttr,
    Function,
    FunctionType,
    IntegerAttr,
    Module,
    Operation,
    TensorViewType,
    Value,
    VerifyError,
    f32,
    i1,
    i32,
    print_function,
    print_module,
    ptr,
    read_bytecode,
    scalar,
    tile,
    verify,
    verify_problems,
    write_bytecode,
)
from tile.ir._cli import main as tile_ir

pytestmark = pytest.mark.fuzz
MUTATIONS = int(os.environ.get("TILE_FUZZ_MUTATIONS", "3000"))
SEED = int(os.environ.get("TILE_FUZZ_SEED", "20261126"))


@pytest.fixture(scope="module")
def seeds() -> list[bytes]:
    return corpus()


def test_seeded_mutations_raise_only_typed_errors_and_finish_within_a_second(seeds: list[bytes]) -> None:
    assert len(seeds) > 500
    report = fuzz(seeds, MUTATIONS, SEED)
    assert sum(report.outcomes.values()) == MUTATIONS
    assert set(report.outcomes) <= {"BytecodeError", "VerifyError", "printed"}
    # The mutations reach past the reader: some modules are read and refused by the verifier, some print.
    assert report.outcomes.get("VerifyError", 0) > 0
    assert report.outcomes.get("printed", 0) > 0
    assert report.slowest < 1.0, f"one input took {report.slowest:.2f} s"


def test_modules_damaged_as_builder_code_can_raise_only_verify_error(seeds: list[bytes]) -> None:
    count = max(MUTATIONS // 3, 1)
    report = fuzz_ir(seeds, count, SEED)
    assert set(report.outcomes) <= {"VerifyError", "printed"}
    assert report.outcomes.get("VerifyError", 0) > count // 4
    assert report.slowest < 1.0, f"one module took {report.slowest:.2f} s"


def test_the_same_seed_makes_the_same_mutations(seeds: list[bytes]) -> None:
    a, b = random.Random(7), random.Random(7)
    assert [mutate(a, seeds[i]) for i in range(50)] == [mutate(b, seeds[i]) for i in range(50)]


def test_the_fuzzer_reports_an_untyped_escape(monkeypatch: pytest.MonkeyPatch, seeds: list[bytes]) -> None:
    def broken(data: bytes) -> None:
        raise KeyError("printer bug")

    monkeypatch.setattr(sys.modules["helpers_ir_mutate"], "run_one", broken)
    with pytest.raises(AssertionError, match="escaped as KeyError"):
        fuzz(seeds, 1, SEED)


# --- the crash classes the fuzzer found, each as a small module the builder can make -----------------------------

I32 = scalar(i32)
Ops = Callable[[Value, Value], list[Operation]]


def _kernel(build: Ops) -> Module:
    """A kernel over (ptr<f32>, i32) holding the ops `build` makes from its parameters, then a return."""
    fn = Function("k", FunctionType((scalar(ptr(f32)), I32)))
    for op in build(*fn.params):
        fn.body.append(op)
    fn.body.append(Operation("return"))
    return Module([fn])


def _short_i1(p: Value, n: Value) -> list[Operation]:
    t = tile((64,), i1)
    return [Operation("constant", [], [t], attributes={"value": DenseElementsAttr(t, b"\x01\x02")}, segments=())]


# name -> (ops, what the crash was before, the op the refusal names)
CASES: dict[str, tuple[Ops, str]] = {
    "tensor-view-result-is-a-tile": (  # AssertionError in the tensor-view printer
        lambda p, n: [Operation("make_tensor_view", [p], [tile((16,), f32)], segments=(1, 0, 0))],
        "make_tensor_view",
    ),
    "tensor-view-missing-dynamic-size": (  # RuntimeError (StopIteration) in the mixed static/dynamic list printer
        lambda p, n: [Operation("make_tensor_view", [p], [TensorViewType(f32, (None,), (1,))], segments=(1, 0, 0))],
        "make_tensor_view",
    ),
    "value-of-function-type": (  # TypeError: no text form for type FunctionType(...)
        lambda p, n: [Operation("absi", [n], [FunctionType((I32,))])],
        "absi",
    ),
    "loop-without-its-block": (  # IRTypeError from Region.block
        lambda p, n: [Operation("loop", [], [], num_regions=1)],
        "loop",
    ),
    "i1-constant-missing-bits": (_short_i1, "constant"),  # IndexError in the SSA-name suggester
    "assume-with-an-integer-predicate": (  # TypeError: not an assume predicate
        lambda p, n: [Operation("assume", [n], [I32], attributes={"predicate": IntegerAttr(i32, 0)})],
        "assume",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_printer_refuses_ir_it_cannot_spell_with_a_verify_error(case: str) -> None:
    build, op_name = CASES[case]
    module = _kernel(build)
    assert verify_problems(module), "each case is invalid IR"
    with pytest.raises(VerifyError, match=op_name):
        print_module(module)
    with pytest.raises(VerifyError, match=op_name):
        print_module(module, debug=True)
    with pytest.raises(VerifyError, match=op_name):
        print_function(module.functions[0])


def test_a_printer_failure_on_ir_that_verifies_is_not_disguised(monkeypatch: pytest.MonkeyPatch) -> None:
    import tile.ir._printer as printer

    def broken(module: Module, debug: bool) -> str:
        raise KeyError("a printer bug")

    monkeypatch.setattr(printer, "_module_text", broken)
    module = _kernel(lambda p, n: [])
    assert verify_problems(module) == []
    with pytest.raises(KeyError, match="a printer bug"):
        print_module(module)


@pytest.mark.parametrize(
    ("case", "reason"),
    [("value-of-function-type", "cannot have the function type"), ("loop-without-its-block", "exactly one block")],
)
def test_the_reader_refuses_what_the_rest_of_tile_ir_cannot_represent(case: str, reason: str) -> None:
    data = write_bytecode(_kernel(CASES[case][0]), V13_4)  # the writer does not verify: it writes the bad IR
    with pytest.raises(BytecodeError, match=reason):
        read_bytecode(data)


def test_tile_ir_dis_reports_ir_it_cannot_print_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.tileirbc"
    path.write_bytes(write_bytecode(_kernel(CASES["tensor-view-result-is-a-tile"][0]), V13_4))
    assert tile_ir(["dis", "--no-verify", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tile-ir: error:")
    assert "make_tensor_view" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("op_name", "attr", "value"), [("reduce", "identities", 3), ("permute", "permutation", "01")])
def test_an_attribute_value_of_the_wrong_kind_is_a_verify_error(op_name: str, attr: str, value: object) -> None:
    module = build_sample(op_name, V13_4)
    op = next(o for fn in module.functions for o in fn.walk() if o.name == op_name)
    op.attributes[attr] = value  # the printer once failed an assert on this
    with pytest.raises(VerifyError, match=f"attribute '{attr}' holds {value!r}, which is not a"):
        verify(module, V13_4)
    with pytest.raises(VerifyError, match="cannot print IR that does not verify"):
        print_module(module)
