"""The ``tile-ir`` command line: dis, asm, verify, info; messages and exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_samples import build_sample
from tile.ir import V13_3, V13_5, print_module, read_bytecode, read_version, write_bytecode
from tile.ir._cli import main


@pytest.fixture
def bytecode(tmp_path: Path) -> Path:
    path = tmp_path / "reduce.tilebc"
    path.write_bytes(write_bytecode(build_sample("reduce", V13_3), V13_3))
    return path


def test_dis_prints_the_text(bytecode: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dis", str(bytecode)]) == 0
    assert capsys.readouterr().out == print_module(read_bytecode(bytecode.read_bytes()))


def test_dis_g_prints_locations(bytecode: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dis", "-g", str(bytecode)]) == 0
    out = capsys.readouterr().out
    assert out == print_module(read_bytecode(bytecode.read_bytes()), debug=True)
    assert out.endswith("#loc = loc(unknown)\n")  # the sample carries no locations
    assert "return loc(#loc)\n" in out


def test_asm_then_dis_round_trips_at_the_requested_version(bytecode: Path, tmp_path: Path) -> None:
    text = tmp_path / "k.tileir"
    assert main(["dis", str(bytecode), "-o", str(text)]) == 0
    out = tmp_path / "k.tilebc"
    assert main(["asm", str(text), "-o", str(out), "--version", "13.5"]) == 0
    assert read_version(out.read_bytes()) == V13_5
    assert print_module(read_bytecode(out.read_bytes())) == text.read_text()


def test_verify_accepts_good_bytecode_and_text(
    bytecode: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(bytecode)]) == 0
    assert "ok (1 function(s), version 13.3)" in capsys.readouterr().out
    text = tmp_path / "k.tileir"
    text.write_text(print_module(read_bytecode(bytecode.read_bytes())))
    assert main(["verify", str(text), "--version", "13.3"]) == 0


def test_verify_reports_ir_problems_with_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "bad.tileir"
    text.write_text("entry @k(%a: tile<f32>) {\n  %0 = addi %a, %a : tile<i32>\n  return\n}\n")
    assert main(["verify", str(text)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{text}: error:")
    assert "addi" in err


def test_asm_refuses_ir_that_does_not_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "bad.tileir"
    text.write_text("entry @k(%a: tile<f32>) {\n  %0 = addi %a, %a : tile<i32>\n  return\n}\n")
    out = tmp_path / "k.tilebc"
    assert main(["asm", str(text), "-o", str(out)]) == 1
    assert "addi" in capsys.readouterr().err
    assert not out.exists()
    assert main(["asm", str(text), "-o", str(out), "--no-verify"]) == 0
    assert main(["dis", str(out)]) == 1
    assert main(["dis", str(out), "--no-verify"]) == 0
    assert "%0 = addi %a, %a : tile<i32>" not in capsys.readouterr().out  # printed with its own names
    assert "%0 = addi %arg0, %arg0 : tile<i32>" in print_module(read_bytecode(out.read_bytes()))


def test_info_lists_version_sections_functions_and_ops(bytecode: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(bytecode)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("version: 13.3")
    for section in ("func", "type", "string"):
        assert f"  {section} " in out
    assert "@k_reduce:" in out
    assert "reduce\n" in out
    assert "ops:" in out


def test_syntax_error_shows_the_caret_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "bad.tileir"
    text.write_text("entry @k() {\n  %0 = make_tokn : token\n  return\n}\n")
    assert main(["asm", str(text), "-o", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert f"{text}:2:8: error: unknown op 'make_tokn'" in err
    assert "       ^" in err
    assert not (tmp_path / "x").exists()


def test_malformed_bytecode_exits_1(tmp_path: Path, bytecode: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.tilebc"
    broken.write_bytes(bytecode.read_bytes()[:40])
    assert main(["dis", str(broken)]) == 1
    assert capsys.readouterr().err.startswith("tile-ir: error:")


def test_missing_file_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(tmp_path / "absent.tilebc")]) == 3
    assert "cannot read" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["asm", "x.tileir", "-o", "y", "--version", "12.0"])
    assert info.value.code == 2
    assert "unsupported bytecode version '12.0'" in capsys.readouterr().err


def test_python_dash_m_runs_the_cli(bytecode: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tile.ir", "dis", str(bytecode)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("entry @k_reduce(")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("tile-ir ")
