"""Stage dumps: what TILE_DUMP selects, where text and binaries go, and that unselected stages cost nothing."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tile.compiler import KnobError, compile_bytecode, knobs
from tile.compiler._dump import Dumper

EMPTY_MODULE = bytes.fromhex(
    "7f54696c6549520 00d030000 820108cb00 850e0402cbcbcb000000000100000000 03 810104cbcbcb00 00".replace(" ", "")
)


def test_tile_dump_parses_stage_lists() -> None:
    assert knobs({"TILE_DUMP": "ir, bytecode"}).dump == {"ir", "bytecode"}
    assert knobs({"TILE_DUMP": "all"}).dump == {"ast", "resolved", "typed", "ir", "bytecode", "cubin"}
    assert knobs({}).dump == frozenset()
    with pytest.raises(KnobError, match=r"TILE_DUMP='ir,llvm'.*not llvm"):
        knobs({"TILE_DUMP": "ir,llvm"})


def test_text_goes_to_the_stream_under_a_header() -> None:
    stream = io.StringIO()
    dumper = Dumper(frozenset({"ir"}), None, "vadd-1234abcd", stream)
    dumper.text("ir", lambda: "entry @vadd() {\n  return\n}\n")
    assert stream.getvalue() == "// ----- TILE_DUMP ir: vadd-1234abcd -----\nentry @vadd() {\n  return\n}\n"


def test_unselected_stages_are_not_even_produced() -> None:
    def explode() -> str:
        raise AssertionError("dump text produced although the stage is not dumped")

    dumper = Dumper(frozenset({"bytecode"}), None, "k", io.StringIO())
    dumper.text("ast", explode)
    dumper.binary("cubin", b"x")
    assert dumper.written == []


def test_dumps_go_to_the_dump_dir(tmp_path: Path) -> None:
    dumper = Dumper(frozenset({"typed", "bytecode"}), tmp_path, "gemm/1", io.StringIO())
    dumper.text("typed", lambda: "typed kernel")
    dumper.binary("bytecode", b"\x7fTileIR\x00")
    assert sorted(p.name for p in dumper.written) == ["gemm_1.tilebc", "gemm_1.typed.txt"]
    assert (tmp_path / "gemm_1.typed.txt").read_text() == "typed kernel"
    assert (tmp_path / "gemm_1.tilebc").read_bytes() == b"\x7fTileIR\x00"


def test_binary_without_a_dump_dir_is_announced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    stream = io.StringIO()
    dumper = Dumper(frozenset({"cubin"}), None, "k", stream)
    dumper.binary("cubin", b"\x7fELF")
    path = tmp_path / "tile-dump" / "k.cubin"
    assert path.read_bytes() == b"\x7fELF"
    assert stream.getvalue() == f"// ----- TILE_DUMP cubin: k -> {path}\n"


def test_an_unwritable_dump_is_reported_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    stream = io.StringIO()
    Dumper(frozenset({"ir"}), blocker, "k", stream).text("ir", lambda: "x")
    assert "TILE_DUMP could not write" in stream.getvalue()


@pytest.mark.requires_tileiras
def test_tile_dump_cubin_writes_the_assembled_cubin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_DUMP", "cubin")
    monkeypatch.setenv("TILE_DUMP_DIR", str(tmp_path / "dumps"))
    monkeypatch.setenv("TILE_CACHE_DIR", "off")
    kernel = compile_bytecode(EMPTY_MODULE, "sm_90", name="empty")
    assert (tmp_path / "dumps" / "empty.cubin").read_bytes() == kernel.cubin
