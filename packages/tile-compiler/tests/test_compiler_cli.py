"""The ``tile`` command line: usage errors, the back-half compile of bytecode files, toolchain and cache commands."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from tile.compiler import SpecError
from tile.compiler._cli import main

EMPTY_MODULE = bytes.fromhex(
    "7f54696c6549520 00d030000 820108cb00 850e0402cbcbcb000000000100000000 03 810104cbcbcb00 00".replace(" ", "")
)


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out), out.getvalue()


@pytest.fixture
def kernel_file(tmp_path: Path) -> Path:
    path = tmp_path / "kernels.py"
    path.write_text("def helper():\n    return 1\n")
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compile", "{file}::k", "--emit", "llvm"], "--emit takes ir, bytecode, cubin or all, not llvm"),
        (["compile", "{file}::k", "--const", "B"], "expected NAME=VALUE, got 'B'"),
        (["compile", "{file}::k", "--const", "B=big"], "const value 'big' is not an int, float or bool"),
        (["compile", "{dir}/missing.py::k"], "no such file"),
        (
            ["compile", "{file}::nope"],
            "has no kernel named 'nope'; it has no @tile.entry kernel (plain functions: helper)",
        ),
        (["compile", "{file}::helper", "--shape", "x=10xten"], "a shape is written like 1024x512, not '10xten'"),
        (["compile", "{file}::helper", "--shape", "x=0"], "extents must be positive"),
    ],
)
def test_usage_errors_exit_2_with_a_message(
    argv: list[str], message: str, kernel_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [a.format(file=kernel_file, dir=kernel_file.parent) for a in argv]
    code, _ = _run(*argv)
    assert code == 2
    assert message in capsys.readouterr().err


def test_unknown_arch_is_an_error(kernel_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _run("compile", f"{kernel_file}::helper", "--arch", "sm_75")
    assert code == 1
    assert "unknown target arch 'sm_75'" in capsys.readouterr().err


def test_tile_debug_shows_the_traceback(kernel_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_DEBUG", "1")
    with pytest.raises(SpecError, match="unknown target arch"):
        main(["compile", f"{kernel_file}::helper", "--arch", "sm_75"])


def test_module_entry_point_shows_help() -> None:
    done = subprocess.run([sys.executable, "-m", "tile.compiler", "--help"], capture_output=True, text=True, check=True)
    assert "compile" in done.stdout
    assert "toolchain" in done.stdout


def test_cache_info_and_clear(tmp_path: Path) -> None:
    from tile.compiler import DiskCache

    DiskCache(tmp_path).put("cubin", "ab" * 32, {}, {"cubin": bytes(2048)})
    code, out = _run("cache", "info", "--cache-dir", str(tmp_path))
    assert code == 0
    assert f"{tmp_path}: 1 entries" in out
    code, out = _run("cache", "clear", "--cache-dir", str(tmp_path))
    assert (code, out) == (0, f"removed 1 entries from {tmp_path}\n")


def test_cache_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_CACHE_DIR", "off")
    assert _run("cache", "info") == (0, "the disk cache is off (TILE_CACHE_DIR=off)\n")


@pytest.mark.requires_tileiras
def test_toolchain_reports_the_assembler() -> None:
    code, out = _run("toolchain")
    assert code == 0
    assert "tileiras:" in out
    assert "bytecode versions: 13.1" in out
    assert "writing:" in out


@pytest.mark.requires_tileiras
def test_compile_bytecode_file_writes_the_cubin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "empty.tilebc"
    source.write_bytes(EMPTY_MODULE)
    code, out = _run("compile", str(source), "--arch", "sm_90", "-o", str(tmp_path / "out"), "--emit", "cubin")
    assert code == 0
    assert (tmp_path / "out" / "empty.cubin").read_bytes()[:4] == b"\x7fELF"
    assert not (tmp_path / "out" / "empty.tilebc").exists()
    assert "empty for sm_90: bytecode 13.3, compiled" in out
    code, out = _run("compile", str(source), "--arch", "sm_90", "-o", str(tmp_path / "out"))
    assert "disk" in out


@pytest.mark.requires_tileiras
def test_compile_failure_exits_1_and_keeps_the_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "junk.tilebc"
    source.write_bytes(b"junk")
    code, _ = _run("compile", str(source), "--cache-dir", str(tmp_path / "cache"), "-o", str(tmp_path))
    assert code == 1
    err = capsys.readouterr().err
    assert "tileiras failed to compile kernel 'junk' for sm_90" in err
    assert str(tmp_path / "cache" / "failed") in err


ADD = """
import tile.compiler.lang as tl
from tile.compiler.lang import Mut, Tensor, f32


def add(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    z.store(tl.load_tile_like(x, z) + tl.load_tile_like(y, z))
"""


def test_compile_a_kernel_for_the_cpu_target(tmp_path: Path) -> None:
    source = tmp_path / "cli_add.py"
    source.write_text(ADD)
    argv = ["compile", f"{source}::add", "--arch", "cpu", "--const", "B=128", "--shape", "x=1024", "--no-cache"]
    code, out = _run(*argv, "--emit", "bytecode", "-o", str(tmp_path / "out"))
    assert code == 0, out
    assert (tmp_path / "out" / "add.tilebc").read_bytes()[:8] == b"\x7fTileIR\x00"
    assert "add for cpu: bytecode 13." in out
    assert "parse" in out


def test_a_kernel_error_is_reported_at_the_source_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "cli_add.py"
    source.write_text(ADD)
    code, _ = _run("compile", f"{source}::add", "--arch", "cpu", "--no-cache", "-o", str(tmp_path))
    assert code == 1
    err = capsys.readouterr().err
    assert "'B'" in err
    assert f"{source}:" in err


def test_cache_list_shows_every_entry(tmp_path: Path) -> None:
    from tile.compiler import DiskCache

    store = DiskCache(tmp_path)
    store.put("kernel", "ab" * 32 + "-cpu", {"name": "gemm", "arch": "sm_90"}, {"cubin": bytes(4096)})
    store.put("cubin", "cd" * 32, {"kernel": "vadd", "arch": "sm_80"}, {"cubin": bytes(1024)})
    code, out = _run("cache", "list", "--cache-dir", str(tmp_path))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"{tmp_path}: 2 entries")
    assert sorted(line.split()[:3] for line in lines[1:]) == [["cubin", "vadd", "sm_80"], ["kernel", "gemm", "sm_90"]]


def test_bad_bytecode_version_is_a_usage_error(kernel_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("compile", f"{kernel_file}::helper", "--bytecode-version", "13")[0] == 2
    assert "--bytecode-version takes MAJOR.MINOR such as 13.3, not '13'" in capsys.readouterr().err


@pytest.mark.requires_tileiras
def test_a_version_tileiras_cannot_read_is_explained(kernel_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = kernel_file.parent / "cli_add.py"
    source.write_text(ADD)
    code, _ = _run("compile", f"{source}::add", "--const", "B=128", "--bytecode-version", "13.0", "--no-cache")
    assert code == 1
    assert (
        "bytecode version 13.0 (TILE_BYTECODE_VERSION or --bytecode-version) is not one our writer"
        in capsys.readouterr().err
    )


@pytest.mark.requires_tileiras
def test_several_archs_at_once_name_their_outputs(tmp_path: Path) -> None:
    source = tmp_path / "cli_add.py"
    source.write_text(ADD)
    argv = ["compile", f"{source}::add", "--arch", "sm_80,sm_90", "--const", "B=128", "--emit", "cubin"]
    code, out = _run(*argv, "--cache-dir", str(tmp_path / "cache"), "-o", str(tmp_path / "out"))
    assert code == 0, out
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["add.sm_80.cubin", "add.sm_90.cubin"]
    assert "add for sm_80" in out
    assert "add for sm_90" in out


def test_ir_to_stdout_and_a_note_for_tensors_without_shapes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "cli_add.py"
    source.write_text(ADD)
    argv = ["compile", f"{source}::add", "--arch", "cpu", "--const", "B=128", "--shape", "x=1024", "--no-cache"]
    code, out = _run(*argv, "--emit", "ir", "-o", "-")
    assert code == 0
    assert out.startswith("entry @add(")
    assert "note: no --shape for z, y: a launch would specialize on them" in capsys.readouterr().err
    assert not (tmp_path / "-").exists()


def test_only_ir_goes_to_stdout(kernel_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("compile", f"{kernel_file}::helper", "-o", "-")[0] == 2
    assert "-o - prints the Tile IR text; add --emit ir" in capsys.readouterr().err


ENTRY_AND_HELPER = (
    ADD
    + """

class Entry:  # what @tile.entry makes: an object wrapping the kernel function
    def __init__(self, fn):
        self.__wrapped__ = fn


def helper(x):
    return x


scaled = Entry(add)
"""
)


def test_an_unknown_kernel_lists_the_entry_kernels_not_the_helpers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "cli_entries.py"
    source.write_text(ENTRY_AND_HELPER)
    assert _run("compile", f"{source}::nope", "--arch", "cpu")[0] == 2
    err = capsys.readouterr().err
    assert "has no kernel named 'nope'; its @tile.entry kernels: scaled" in err
    assert "helper" not in err


@pytest.fixture
def no_tileiras(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A machine without tileiras: no override, no pip package, nothing on PATH or under CUDA_HOME."""
    import tile.bindings._tileiras

    monkeypatch.delenv("TILE_TILEIRAS", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(tile.bindings._tileiras, "_pip_candidate", lambda: None)


@pytest.mark.usefixtures("no_tileiras")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100", "sm_120"])
@pytest.mark.parametrize("cache", [["--no-cache"], []])
def test_ir_and_bytecode_need_no_tileiras(arch: str, cache: list[str], tmp_path: Path) -> None:
    source = tmp_path / "cli_add.py"
    source.write_text(ADD)
    out_dir = tmp_path / "out"
    argv = ["compile", f"{source}::add", "--arch", arch, "--const", "B=128", "--emit", "ir,bytecode", *cache]
    code, out = _run(*argv, "--cache-dir", str(tmp_path / "cache"), "-o", str(out_dir))
    assert code == 0, out
    assert sorted(p.name for p in out_dir.iterdir()) == ["add.tilebc", "add.tileir"]
    assert (out_dir / "add.tilebc").read_bytes()[:8] == b"\x7fTileIR\x00"
    assert "entry @add(" in (out_dir / "add.tileir").read_text()
    assert f"add for {arch}: bytecode 13.5" in out


@pytest.mark.usefixtures("no_tileiras")
def test_a_cubin_without_tileiras_names_the_fix_and_under_no_cache_not_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "cli_add.py"
    source.write_text(ADD)
    argv = ["compile", f"{source}::add", "--const", "B=128", "--emit", "cubin", "-o", str(tmp_path / "out")]
    assert _run(*argv, "--no-cache", "--cache-dir", str(tmp_path / "cache"))[0] == 1
    err = capsys.readouterr().err
    assert "pip install 'tile-frontend[gpu]'" in err
    assert "'tile-compiler[gpu]'" in err
    assert "--arch cpu" in err
    assert "cache" not in err.lower()
    assert _run(*argv, "--cache-dir", str(tmp_path / "cache"))[0] == 1
    err = capsys.readouterr().err
    assert "pip install 'tile-frontend[gpu]'" in err
    assert f"TILE_CACHE_DIR={tmp_path / 'cache'} holds no precompiled entry" in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("tile (tile-compiler) ")


TYPED_HELPER = """
import tile.compiler.lang as tl
from tile.compiler.lang import Mut, Tensor, f32


class View:  # what tile.frontend.kernel_types declares: a type for checkers, not a kernel-language annotation
    __tile_kernel_type__ = True


@tl.function
def twice(t: View) -> View:
    return t + t


def double(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]) -> None:
    z.store(twice(tl.load_tile_like(x, z)))
"""


def test_a_helper_parameter_typed_for_checkers_is_unannotated_for_the_compiler(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "cli_typed_helper.py"
    source.write_text(TYPED_HELPER)
    argv = ["compile", f"{source}::double", "--arch", "cpu", "--const", "B=64", "--emit", "ir", "--no-cache", "-o", "-"]
    code, out = _run(*argv)
    assert code == 0, out
    assert "entry @double(" in out
    source.write_text(TYPED_HELPER.replace("__tile_kernel_type__ = True", "pass"))
    capsys.readouterr()
    assert _run(*argv)[0] == 1  # without the marker the annotation is an unsupported one, as before
    assert "parameter 't' has an unsupported annotation" in capsys.readouterr().err


WALK = """
import tile.compiler.lang as tile
from tile.compiler.lang import Mut, Tensor, f32


def walk(z: Mut[Tensor[f32, ("B",)]]):
    for idx in z.tiles():
        z.store(tile.zeros((B,), f32), at=idx)
"""


def test_any_grid_compiles_a_tiles_walk_as_a_loop(tmp_path: Path) -> None:
    # By default the CLI compiles for a launch without .grid() (one block per tile: the walk is an if, see
    # Specialization.own_grid); --any-grid compiles what kernel.grid(g) launches get (the walk loops).
    source = tmp_path / "cli_walk.py"
    source.write_text(WALK)
    argv = ["compile", f"{source}::walk", "--arch", "cpu", "--const", "B=128", "--shape", "z=1024", "--no-cache"]
    code, own = _run(*argv, "--emit", "ir", "-o", "-")
    assert code == 0
    assert " = if " in own
    assert "for %" not in own
    code, anywhere = _run(*argv, "--any-grid", "--emit", "ir", "-o", "-")
    assert code == 0
    assert "for %" in anywhere
    assert " = if " not in anywhere
