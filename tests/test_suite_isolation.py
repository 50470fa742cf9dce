"""The test suite itself keeps out of the user's files: compiled kernels land in a temporary cache."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import tile.compiler as tc
from tile.compiler._knobs import knobs


def test_the_disk_cache_is_a_temporary_folder_not_the_users() -> None:
    folder = Path(os.environ["TILE_CACHE_DIR"])
    assert folder.is_relative_to(Path(tempfile.gettempdir()))
    assert folder.name.startswith("tile-test-cache-")
    assert not folder.is_relative_to(Path.home() / ".cache")
    assert knobs().cache_dir == folder


def test_a_compile_fills_the_temporary_cache(tmp_path: Path) -> None:
    source = tmp_path / "cache_probe.py"
    source.write_text(
        "import tile.compiler.lang as tl\n"
        "from tile.compiler.lang import Mut, Tensor, f32\n\n\n"
        "def probe(z: Mut[Tensor[f32, 'B']], x: Tensor[f32, -1]):\n"
        "    z.store(tl.load_tile_like(x, z) * 3.0)\n"
    )
    namespace: dict[str, object] = {}
    exec(compile(source.read_text(), str(source), "exec"), namespace)  # a real file: the compiler reads the source
    before = set(Path(os.environ["TILE_CACHE_DIR"]).rglob("*"))
    tc.compile_kernel(namespace["probe"], tc.Specialization.make(consts={"B": 64}), "cpu")  # type: ignore[arg-type]
    assert set(Path(os.environ["TILE_CACHE_DIR"]).rglob("*")) - before
