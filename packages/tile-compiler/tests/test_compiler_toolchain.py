"""tileiras discovery, probing, running and failure translation (fake assemblers, then the real one)."""

from __future__ import annotations

import importlib.util
import pickle
import stat
from pathlib import Path

import pytest

import tile.bindings._tileiras as tileiras_discovery
import tile.compiler._toolchain as toolchain_module
from tile.compiler import TileirasError, TileirasNotFoundError, find_tileiras, knobs, toolchain
from tile.compiler._knobs import tileiras_environment

EMPTY_MODULE = bytes.fromhex(
    "7f54696c6549520 00d030000 820108cb00 850e0402cbcbcb000000000100000000 03 810104cbcbcb00 00".replace(" ", "")
)

# A stand-in for tileiras: logs its calls and environment, then behaves as the file `mode` next to it says.
_FAKE = """#!/bin/sh
here=$(dirname "$0")
echo "$*" >> "$here/calls.log"
case "$1" in
  --version) printf 'tileiras: fake\\nCuda compilation tools, release 13.4, V13.4.99\\n'; exit 0;;
  --list-versions) printf '13.1\\n13.2\\n13.3\\n13.4\\n'; exit 0;;
esac
echo "CUDA_HOME=${CUDA_HOME-unset}" >> "$here/env.log"
out=""
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then out="$2"; fi
  shift
done
case "$(cat "$here/mode" 2>/dev/null)" in
  fail) echo "loc(\\"k.py\\":3:4): error: 'cuda_tile.addf' op failed to verify" >&2; exit 3;;
  version) echo "error: unsupported Tile IR bytecode version: 13.9" >&2; exit 3;;
  invalid) printf "%s\n" "error: 'cuda_tile.load_view_tko' op inbounds size (0) must match" \
    "error: verification failed for deserialized cuda_tile::ModuleOp" \
    "error: input does not correspond to Tile IR bytecode" >&2; exit 3;;
  crash) kill -SEGV $$;;
  slow) sleep 5;;
  *) printf 'FAKECUBIN' > "$out";;
esac
"""


def _fake_tileiras(root: Path, mode: str = "ok") -> Path:
    binary = root / "bin" / "tileiras"
    binary.parent.mkdir(parents=True, exist_ok=True)
    binary.write_text(_FAKE)
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    (binary.parent / "mode").write_text(mode)
    return binary


def _calls(binary: Path) -> list[str]:
    log = binary.parent / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    binary = _fake_tileiras(tmp_path / "kit")
    monkeypatch.setenv("TILE_TILEIRAS", str(binary))
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(toolchain_module, "_PROBED", {})
    return binary


def test_tile_tileiras_comes_first(fake: Path) -> None:
    assert find_tileiras() == (fake.resolve(), "TILE_TILEIRAS")


def test_a_tile_tileiras_that_does_not_exist_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TILE_TILEIRAS", str(tmp_path / "nope"))
    with pytest.raises(TileirasNotFoundError, match="is not a file; point it at tileiras or unset it"):
        find_tileiras()


def test_discovery_order_after_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_path = _fake_tileiras(tmp_path / "path-kit")
    in_home = _fake_tileiras(tmp_path / "home-kit")
    monkeypatch.setattr(tileiras_discovery, "_pip_candidate", lambda: None)  # hide the pip package
    env = {"PATH": str(on_path.parent), "CUDA_HOME": str(in_home.parents[1])}
    assert find_tileiras(knobs(env)) == (on_path.resolve(), "PATH")
    assert find_tileiras(knobs({"CUDA_HOME": env["CUDA_HOME"], "PATH": ""})) == (in_home.resolve(), "CUDA_HOME")
    with pytest.raises(TileirasNotFoundError, match=r"pip install 'tile-frontend\[gpu\]'"):
        find_tileiras(knobs({"PATH": ""}))


def test_probe_reads_version_and_bytecode_versions_and_is_remembered(fake: Path) -> None:
    found = toolchain()
    assert found.version == "13.4.99"
    assert found.bytecode_versions == ((13, 1), (13, 2), (13, 3), (13, 4))
    assert found.root == fake.parents[1]
    assert len(found.fingerprint) == 16
    assert toolchain() is found
    toolchain_module._PROBED.clear()
    assert toolchain() == found  # from the memo in the cache folder, without running the binary again
    assert _calls(fake) == ["--version", "--list-versions"]


def test_compile_runs_without_a_foreign_cuda_home(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_HOME", "/usr/local/cuda-13.0")
    cubin = toolchain().compile(b"bytecode", kernel="vadd", arch="sm_90", opt_level=2)
    assert cubin == b"FAKECUBIN"
    assert (fake.parent / "env.log").read_text() == "CUDA_HOME=unset\n"
    assert "--gpu-name sm_90 --opt-level=2 --lineinfo -o" in _calls(fake)[-1]


def test_a_full_toolkit_root_is_passed_as_cuda_home(tmp_path: Path) -> None:
    root = tmp_path / "kit"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "ptxas").write_text("")
    (root / "nvvm").mkdir()
    env = tileiras_environment(root, {"CUDA_HOME": "/elsewhere", "CUDA_PATH": "/x", "HOME": "/h"})
    assert env == {"CUDA_HOME": str(root), "HOME": "/h"}
    assert tileiras_environment(tmp_path, {"CUDA_HOME": "/elsewhere"}) == {}


@pytest.mark.parametrize(
    ("mode", "cause"),
    [
        ("fail", "k.py:3:4: 'cuda_tile.addf' op failed to verify (exit status 3)"),
        (
            "invalid",
            "'cuda_tile.load_view_tko' op inbounds size (0) must match (tileiras rejected the input as malformed",
        ),
        ("version", "cannot read the bytecode version we wrote; set TILE_BYTECODE_VERSION"),
        ("crash", "tileiras crashed (signal SIGSEGV)"),
    ],
)
def test_failures_name_kernel_arch_cause_and_keep_the_bytecode(
    fake: Path, tmp_path: Path, mode: str, cause: str
) -> None:
    (fake.parent / "mode").write_text(mode)
    with pytest.raises(TileirasError) as info:
        toolchain().compile(b"\x7fTileIR\x00bad", kernel="gemm", arch="sm_90", keep_dir=tmp_path / "kept")
    error = info.value
    assert (error.kernel, error.arch) == ("gemm", "sm_90")
    assert cause in error.cause
    kept = Path(error.bytecode_path)
    assert kept.parent == tmp_path / "kept"
    assert kept.read_bytes() == b"\x7fTileIR\x00bad"
    message = str(error)
    assert "tileiras failed to compile kernel 'gemm' for sm_90" in message
    assert f"kept for reproduction: {kept}" in message
    assert "env -u CUDA_HOME" in message
    assert "open an issue" in message
    assert isinstance(error, RuntimeError)


def test_a_hung_tileiras_times_out(fake: Path, tmp_path: Path) -> None:
    (fake.parent / "mode").write_text("slow")
    with pytest.raises(TileirasError, match=r"timed out after 0\.5 s; raise TILE_COMPILE_TIMEOUT") as info:
        toolchain().compile(b"x", kernel="k", arch="sm_80", timeout=0.5, keep_dir=tmp_path)
    assert info.value.returncode is None


def test_tileiras_error_pickles() -> None:
    error = TileirasError("k", "sm_90", "cause", 3, "error: x", "/tmp/k.tilebc", "tileiras ...")
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error)
    assert again.bytecode_path == "/tmp/k.tilebc"


# --- the real assembler --------------------------------------------------------------------------------------


@pytest.mark.requires_tileiras
def test_the_real_tileiras_is_found_and_probed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))
    found = toolchain()
    assert found.tileiras.name == "tileiras"
    assert (13, 3) in found.bytecode_versions
    assert found.version.count(".") == 2


@pytest.mark.requires_tileiras
@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100"])
def test_the_real_tileiras_makes_an_elf_cubin(arch: str) -> None:
    assert toolchain().compile(EMPTY_MODULE, kernel="empty", arch=arch)[:4] == b"\x7fELF"


@pytest.mark.requires_tileiras
def test_the_real_tileiras_rejecting_garbage_is_explained(tmp_path: Path) -> None:
    with pytest.raises(TileirasError, match="malformed Tile IR bytecode") as info:
        toolchain().compile(b"not bytecode", kernel="junk", arch="sm_90", keep_dir=tmp_path)
    assert "input does not correspond to Tile IR bytecode" in info.value.stderr
    assert Path(info.value.bytecode_path).read_bytes() == b"not bytecode"


_CUTILE_VADD = """
import cuda.tile as ct


@ct.kernel
def vadd(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(c, index=(bid,), tile=ct.load(a, index=(bid,), shape=(TILE,)) + ct.load(b, index=(bid,), shape=(TILE,)))
"""


@pytest.mark.requires_tileiras
@pytest.mark.requires_cutile
def test_bytecode_exported_by_cutile_python_compiles_with_its_entry_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature, export_kernel

    import tile.compiler as tc

    source = tmp_path / "cutile_vadd.py"
    source.write_text(_CUTILE_VADD)
    spec = importlib.util.spec_from_file_location("cutile_vadd", source)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    array = ArrayConstraint(
        ct.float32, 1, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(), may_alias_internally=False
    )
    signature = KernelSignature([array, array, array, 128], CallingConvention.cutile_python_v2(), symbol="vadd_peer")
    bytecode_file = tmp_path / "vadd.tilebc"
    export_kernel(
        module.vadd, [signature], str(bytecode_file), output_format="tileir_bytecode", bytecode_version="13.3"
    )
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    kernel = tc.compile_bytecode(bytecode_file.read_bytes(), "sm_90")
    assert kernel.entry == "vadd_peer"
    assert kernel.name == "vadd_peer"
    assert kernel.bytecode_version == (13, 3)
    assert kernel.cubin is not None
    assert b"vadd_peer\x00" in kernel.cubin
