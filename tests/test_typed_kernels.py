"""Kernels type-check: ``mypy --strict`` with ``tile.frontend.mypy_plugin`` on the README kernel and every example.

The plugin must also find real mistakes (a misspelt method, a store into an input), the typed classes must cover the
kernel language's whole method table, and a helper annotated with them must still compile.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tile.compiler.lang import METHODS
from tile.frontend import kernel_types

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("mypy", reason="mypy is in the root test group (bash scripts/dev.sh test installs it)")


def _mypy(tmp_path: Path, *paths: str | Path) -> subprocess.CompletedProcess[str]:
    """mypy --strict with the repository's configuration (which loads the plugin)."""
    argv = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "mypy-cache"), *map(str, paths)]
    env = {**os.environ, "MYPYPATH": os.pathsep.join(str(p) for p in sorted((ROOT / "packages").glob("*/src")))}
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300, check=False)


def test_the_readme_kernel_and_every_example_pass_mypy_strict(tmp_path: Path) -> None:
    readme = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.DOTALL)[0]
    (tmp_path / "readme_kernel.py").write_text(readme)
    examples = sorted((ROOT / "examples").glob("*.py"))
    assert len(examples) >= 10
    for example in examples:
        assert "mypy: ignore-errors" not in example.read_text()
        assert "type: ignore" not in example.read_text()
    done = _mypy(tmp_path, tmp_path / "readme_kernel.py", *examples)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"no issues found in {len(examples) + 1} source files" in done.stdout


def test_mistakes_in_a_kernel_are_reported(tmp_path: Path) -> None:
    source = tmp_path / "wrong.py"
    source.write_text(
        textwrap.dedent(
            """
            import tile.frontend as tile
            from tile.frontend import Const, Mut, Tensor, f32

            B: int


            @tile.entry
            def bad(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], n: Const[int]) -> None:
                t = x.partition((B,)).load(tile.block_id())
                z.stor(t)
                x.store(t)
                t.load()
                reveal_type(n)
                reveal_type(tile.zeros((B,), f32))
                x.subtiles((B,))
                z.subtiles((B,)).store(t)
                reveal_type(tile.truediv(t, 2.0, rounding="approx", flush_to_zero=True))
                tile.exp2(t, flush_to_zro=True)
                reveal_type(tile.block_id())
                reveal_type(x.gather(tile.arange(B), padding=-1.0))
                z.gather(tile.arange(B))


            host = tile.zeros(f32, [4])
            reveal_type(host)
            """
        )
    )
    out = _mypy(tmp_path, source).stdout
    assert '"MutParam" has no attribute "stor"; maybe "store"?' in out
    assert '"TensorParam" has no attribute "store"' in out
    assert '"Tile" has no attribute "load"' in out
    assert "wrong.py:16: error: an input owns no tile: subtiles() cuts the tile a block owns" in out
    assert 'wrong.py:17: error: Missing positional argument "index" in call to "store" of "SubtileView"' in out
    assert 'wrong.py:18: note: Revealed type is "tile.frontend.kernel_types.Tile"' in out  # a tile-valued op
    assert "wrong.py:19: error: tile.exp2() takes no keyword argument 'flush_to_zro'; it takes x, rounding, " in out
    assert 'wrong.py:20: note: Revealed type is "Any"' in out  # block_id's tuple is not a tile
    assert 'wrong.py:21: note: Revealed type is "tile.frontend.kernel_types.Tile"' in out  # a checked gather
    assert "wrong.py:22: error: a Mut output cannot be gathered from: other blocks may be writing" in out
    assert "unreachable" not in out
    assert re.search(r'wrong.py:14: note: Revealed type is "(builtins\.)?int"', out)  # Const[int]
    assert 'Revealed type is "tile.frontend.kernel_types.Tile"' in out  # tile.zeros inside a kernel
    assert 'Revealed type is "tile.frontend._tensor.Tensor"' in out  # and on the host


def test_every_receiver_kind_of_the_method_table_has_a_typed_class() -> None:
    assert sorted(kernel_types.CLASSES) == sorted(METHODS)
    assert kernel_types.CLASSES["mut"] is kernel_types.MutParam
    assert kernel_types.CLASSES["subtiles"] is kernel_types.SubtileView


@pytest.mark.parametrize("kind", sorted(METHODS))
def test_the_typed_classes_cover_the_method_table(kind: str) -> None:
    cls = kernel_types.CLASSES[kind]
    missing = sorted(name for name in METHODS[kind] if not callable(getattr(cls, name, None)))
    assert missing == [], f"tile.frontend.kernel_types.{cls.__name__} lacks {missing}"


def test_a_helper_annotated_with_the_typed_classes_compiles(tmp_path: Path) -> None:
    source = tmp_path / "typed_helper.py"
    source.write_text(
        textwrap.dedent(
            """
            import numpy as np

            import tile.frontend as tile
            from tile.frontend import Mut, Tensor, f32
            from tile.frontend.kernel_types import PartitionView, Tile

            B: int


            @tile.function
            def twice(p: PartitionView, at: Tile) -> Tile:
                return p.load((at,)) * 2.0


            @tile.entry
            def double(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]) -> None:
                z.store(twice(x.partition((B,)), tile.block_id()[0]))


            z, _ = double(tile.zeros(f32, [256]).partition([64]), tile.ones(f32, [256])).sync()
            assert np.array_equal(z.unpartition().to_numpy(), np.full(256, 2.0, np.float32))
            print("ok")
            """
        )
    )
    env = {**os.environ, "TILE_INTERPRET": "1"}
    done = subprocess.run([sys.executable, str(source)], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert _mypy(tmp_path, source).returncode == 0


def test_outside_a_kernel_the_typed_classes_refuse_to_run() -> None:
    with pytest.raises(TypeError, match=r"only be used inside a @tile\.entry kernel"):
        kernel_types.Tile()
    with pytest.raises(TypeError, match="only be used inside"):
        kernel_types.MutParam.store(object(), 1.0)  # type: ignore[arg-type]  # any receiver: the body never runs
