"""The whole pipeline behind `compile_kernel`: stages, version choice, keys, caches across threads and processes,
and the ahead-of-time cache used on a GPU machine without tileiras."""

from __future__ import annotations

import importlib.util
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path

import pytest

import tile.compiler as tc
import tile.ir
from tile.compiler import (
    ArraySpec,
    CompiledKernel,
    Specialization,
    Target,
    Toolchain,
    ToolchainError,
    cache_stats,
    choose_version,
    compile_kernel,
    frontend_key,
)
from tile.compiler._pipeline import Clock

sys.path.insert(0, str(Path(__file__).parent))
from helpers_compiler_child import json_result, spawn

KERNELS = textwrap.dedent(
    """
    import tile.compiler.lang as tl
    from tile.compiler.lang import Const, Mut, Tensor, f16, f32

    SCALE = 2.0


    def add(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
        tx = tl.load_tile_like(x, z)
        ty = tl.load_tile_like(y, z)
        z.store(tx + ty)


    def gemm(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f16, (-1, -1)], y: Tensor[f16, (-1, -1)], BK: Const[int]):
        part_x = x.partition((BM, BK))
        part_y = y.partition((BK, BN))
        acc = tl.zeros((BM, BN), f32)
        pid = tl.block_id()
        for k in range(tl.cdiv(x.shape[1], BK)):
            acc = tl.mma(part_x.load((pid[0], k)), part_y.load((k, pid[1])), acc)
        z.store(acc)


    def scaled(x):
        return x * SCALE


    def scaled_add(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, 256], a: float):
        z.store(a * tl.load_tile_like(x, z))


    def calls_helper(x):
        return helper(x)
    """
)
ADD_SPEC = Specialization.make(consts={"B": 128})
GEMM_SPEC = Specialization.make(consts={"BM": 64, "BN": 64, "BK": 32})


def _import(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    path = tmp_path / "tile_test_kernels.py"
    path.write_text(KERNELS)
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    tc.clear_memory_cache()
    return _import(path, "tile_test_kernels")


def _toolchain(*versions: tuple[int, int]) -> Toolchain:
    return Toolchain(Path("/x/bin/tileiras"), "test", "13.9.0", "fake", versions)


def test_stages_are_named_in_order() -> None:
    assert tc.STAGES == ("parse", "resolve", "typecheck", "lower", "verify", "bytecode", "cubin")


def test_version_is_the_highest_both_sides_read() -> None:
    assert choose_version(None, _toolchain((13, 1), (13, 2), (13, 3))) == (13, 3)
    assert choose_version(None, None) == max(
        (v.major, v.minor) for v in tc.choose_version.__globals__["SUPPORTED_VERSIONS"]
    )
    assert choose_version((13, 2), _toolchain((13, 2), (13, 3))) == (13, 2)


def test_version_errors_say_what_to_do() -> None:
    with pytest.raises(
        ToolchainError,
        match=r"13\.4 \(TILE_BYTECODE_VERSION or --bytecode-version\) is not read by tileiras 13\.9\.0; use one",
    ):
        choose_version((13, 4), _toolchain((13, 1), (13, 3)))
    with pytest.raises(tc.SpecError, match="is not one our writer supports"):
        choose_version((12, 0), _toolchain((12, 0)))
    with pytest.raises(ToolchainError, match="no common version"):
        choose_version(None, _toolchain((14, 0)))


def test_clock_accumulates_per_stage() -> None:
    clock = Clock()
    for _ in range(2):
        with clock.stage("parse"):
            time.sleep(0.002)
    with clock.stage("lower"):
        pass
    assert list(clock.seconds) == ["parse", "lower"]
    assert clock.seconds["parse"] >= 0.004
    assert clock.seconds["lower"] < clock.seconds["parse"]


def test_cpu_target_runs_the_frontend_only(kernels: types.ModuleType) -> None:
    kernel = compile_kernel(kernels.add, ADD_SPEC, Target.cpu())
    assert kernel.cubin is None
    assert kernel.bytecode[:8] == b"\x7fTileIR\x00"
    assert kernel.entry == "add"
    assert [s.role for s in kernel.abi.slots[:3]] == ["base", "shape", "stride"]
    assert kernel.ir_text().startswith("entry @add(%arg0: tile<ptr<f32>>")
    assert list(kernel.timings)[-6:] == ["parse", "resolve", "typecheck", "lower", "verify", "bytecode"]
    again = compile_kernel(kernels.add, ADD_SPEC, Target.cpu())
    assert again.origin == "memory"
    assert again == kernel
    shipped = pickle.loads(pickle.dumps(kernel))  # compile workers and autotuners hand kernels across processes
    assert shipped == kernel
    assert shipped.abi == kernel.abi


def test_frontend_key_tracks_code_not_extents(kernels: types.ModuleType, tmp_path: Path) -> None:
    base = frontend_key(kernels.gemm, GEMM_SPEC, Target("sm_90"), None)
    small = Specialization.make({"x": ArraySpec.of("f16", (128, 64), (64, 1))}, dict(GEMM_SPEC.consts))
    large = Specialization.make({"x": ArraySpec.of("f16", (4096, 2048), (2048, 1))}, dict(GEMM_SPEC.consts))
    assert frontend_key(kernels.gemm, small, Target("sm_90"), None) == frontend_key(
        kernels.gemm, large, Target("sm_90"), None
    )
    assert frontend_key(kernels.gemm, GEMM_SPEC, Target("sm_90"), None) == base
    assert frontend_key(kernels.gemm, GEMM_SPEC, Target("sm_80"), None) != base
    assert frontend_key(kernels.gemm, GEMM_SPEC, Target("sm_90"), (13, 3)) != base
    wider = Specialization.make(consts={"BM": 128, "BN": 64, "BK": 32})
    assert frontend_key(kernels.gemm, wider, Target("sm_90"), None) != base
    assert frontend_key(kernels.add, ADD_SPEC, Target("sm_90"), None) != base
    edited = tmp_path / "tile_test_kernels_edited.py"
    edited.write_text(KERNELS.replace("acc = tl.zeros", "acc = tl.zeros  # edited\n    acc = tl.zeros"))
    other = _import(edited, "tile_test_kernels")
    assert frontend_key(other.gemm, GEMM_SPEC, Target("sm_90"), None) != base


def test_frontend_key_follows_referenced_globals_and_user_helpers(
    kernels: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fingerprint = tc._fingerprint.source_fingerprint
    add, scaled = fingerprint(kernels.add), fingerprint(kernels.scaled)
    monkeypatch.setattr(kernels, "SCALE", 3.0)
    assert fingerprint(kernels.add) == add  # add does not read SCALE
    assert fingerprint(kernels.scaled) != scaled
    helper_file = tmp_path / "tile_test_helpers.py"
    helper_file.write_text("def helper(x):\n    return x\n")
    helpers = _import(helper_file, "tile_test_helpers")
    monkeypatch.setattr(kernels, "helper", helpers.helper, raising=False)
    before = fingerprint(kernels.calls_helper)
    helper_file.write_text("def helper(x):\n    return x + 1\n")
    assert fingerprint(kernels.calls_helper) != before


def test_specialize_derives_the_facts_of_a_call(kernels: types.ModuleType) -> None:
    spec = tc.specialize(
        kernels.add, {"x": (1024,), "y": (1000,), "z": (1024,)}, pointers={"x": 0x10008}, consts={"B": 128}
    )
    x, y = spec.param("x"), spec.param("y")
    assert x == ArraySpec("f32", 1, stride_one=(True,), shape_div=(16,), stride_div=(1,), base_div=8)
    assert isinstance(y, ArraySpec)
    assert y.shape_div == (8,)
    assert spec.const("B") == 128
    same = tc.specialize(kernels.add, {"x": (4096,), "y": (8,), "z": (64,)}, pointers={"x": 0x20008}, consts={"B": 128})
    assert same == spec  # other extents, same facts: one compiled kernel serves both
    strided = tc.specialize(kernels.gemm, {"x": (64, 64)}, strides={"x": (1, 64)}, consts=dict(GEMM_SPEC.consts))
    gx = strided.param("x")
    assert isinstance(gx, ArraySpec)
    assert gx.stride_one == (True, False)


def test_specialize_mirrors_a_launch_static_dims_scalars_and_wide_indices(kernels: types.ModuleType) -> None:
    spec = tc.specialize(kernels.scaled_add, {"x": (256,), "z": (2**31 + 16,)}, consts={"B": 128})
    x, z = spec.param("x"), spec.param("z")
    assert isinstance(x, ArraySpec)
    assert isinstance(z, ArraySpec)
    assert x.static_shape == (256,)  # fixed in the annotation: compiled in
    assert z.static_shape == (None,)  # outputs' extents stay dynamic
    assert (x.index_dtype, z.index_dtype) == ("i32", "i64")
    assert spec.param("a") == tc.ScalarSpec("f32")


def test_specialize_rejects_parameters_that_are_not_tensors(kernels: types.ModuleType) -> None:
    with pytest.raises(tc.SpecError, match=r"'gemm' has no tensor parameter 'BK'"):
        tc.specialize(kernels.gemm, {"BK": (32,)})


def test_frontend_key_is_the_same_in_another_process(kernels: types.ModuleType, tmp_path: Path) -> None:
    tc._fingerprint.toolkit_fingerprint.cache_clear()  # sources may have been edited since this process hashed them
    here = frontend_key(kernels.add, ADD_SPEC, Target("sm_90"), None)
    code = (
        "import importlib.util, sys; import tile.compiler as tc\n"
        "spec = importlib.util.spec_from_file_location('tile_test_kernels', sys.argv[1])\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print(tc.frontend_key(m.add, tc.Specialization.make(consts={'B': 128}), tc.Target('sm_90'), None))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "tile_test_kernels.py")], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == here


# --- with the real tileiras ----------------------------------------------------------------------------------


@pytest.mark.requires_tileiras
def test_gemm_compiles_to_a_cubin_with_its_entry_symbol(kernels: types.ModuleType) -> None:
    kernel = compile_kernel(kernels.gemm, GEMM_SPEC, "sm_90")
    assert kernel.cubin is not None
    assert kernel.cubin[:4] == b"\x7fELF"
    assert b"gemm\x00" in kernel.cubin
    assert kernel.origin == "compiled"
    assert kernel.tileiras_version is not None
    assert set(tc.STAGES) <= set(kernel.timings)


@pytest.mark.requires_tileiras
def test_tile_dump_writes_every_stage(
    kernels: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILE_DUMP", "all")
    monkeypatch.setenv("TILE_DUMP_DIR", str(tmp_path / "dumps"))
    compile_kernel(kernels.add, ADD_SPEC, "sm_90", cache=False)
    names = sorted(p.name.split(".", 1)[1] for p in (tmp_path / "dumps").iterdir())
    assert names == ["ast.txt", "cubin", "ir.txt", "resolved.txt", "tilebc", "typed.txt"]


@pytest.mark.requires_tileiras
def test_concurrent_threads_compile_once(kernels: types.ModuleType) -> None:
    cache_stats(reset=True)
    results: list[CompiledKernel] = []
    barrier = threading.Barrier(6)

    def work() -> None:
        barrier.wait()
        results.append(compile_kernel(kernels.add, ADD_SPEC, "sm_90"))

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = cache_stats()
    assert (stats.frontend_runs, stats.tileiras_runs, stats.memory_hits) == (1, 1, 5)
    assert len({r.cubin for r in results}) == 1
    assert sorted(r.origin for r in results) == ["compiled"] + ["memory"] * 5


_CHILD = """
import importlib.util, json, sys
import tile.compiler as tc
import tile.ir
if sys.argv[3] == "hide-tileiras":
    import tile.bindings._tileiras
    tile.bindings._tileiras._pip_candidate = lambda: None
spec = importlib.util.spec_from_file_location("tile_test_kernels", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
k = tc.compile_kernel(m.add, tc.Specialization.make(consts={"B": 128}), "sm_90")
s = tc.cache_stats()
print(json.dumps({"origin": k.origin, "frontend_runs": s.frontend_runs, "tileiras_runs": s.tileiras_runs,
                  "cubin": k.cubin.hex()}))
"""


def _spawn(kernel_file: Path, cache_dir: Path, mode: str = "") -> subprocess.Popen[str]:
    env = {**os.environ, "TILE_CACHE_DIR": str(cache_dir)}
    if mode == "hide-tileiras":
        env = {k: v for k, v in env.items() if k not in ("TILE_TILEIRAS", "CUDA_HOME")} | {"PATH": ""}
    return spawn(_CHILD, [str(kernel_file), str(cache_dir), mode or "-"], env)


def _result(proc: subprocess.Popen[str]) -> dict[str, object]:
    return json_result(proc, timeout=300)


@pytest.mark.requires_tileiras
def test_a_second_process_hits_the_disk_cache_without_running_the_frontend(tmp_path: Path) -> None:
    source = tmp_path / "tile_test_kernels.py"
    source.write_text(KERNELS)
    first = _result(_spawn(source, tmp_path / "c"))
    second = _result(_spawn(source, tmp_path / "c"))
    assert (first["origin"], first["frontend_runs"], first["tileiras_runs"]) == ("compiled", 1, 1)
    assert (second["origin"], second["frontend_runs"], second["tileiras_runs"]) == ("disk", 0, 0)
    assert first["cubin"] == second["cubin"]


@pytest.mark.requires_tileiras
def test_two_processes_compiling_the_same_kernel_at_once_both_succeed(tmp_path: Path) -> None:
    source = tmp_path / "tile_test_kernels.py"
    source.write_text(KERNELS)
    results = [_result(p) for p in [_spawn(source, tmp_path / "c") for _ in range(3)]]
    assert len({str(r["cubin"]) for r in results}) == 1
    # The build lock lets one process compile; the others wait for it and read its entry.
    assert sum(int(str(r["frontend_runs"])) for r in results) == 1
    assert sum(int(str(r["tileiras_runs"])) for r in results) == 1
    assert sorted(str(r["origin"]) for r in results) == ["compiled", "disk", "disk"]
    assert _result(_spawn(source, tmp_path / "c"))["origin"] == "disk"


@pytest.mark.requires_tileiras
def test_a_corrupt_kernel_entry_is_evicted_and_recompiled(kernels: types.ModuleType, tmp_path: Path) -> None:
    first = compile_kernel(kernels.add, ADD_SPEC, "sm_90")
    store = tc.DiskCache(tmp_path / "cache")
    for entry in store.entries():
        data = bytearray(Path(entry.path).read_bytes())
        data[len(data) // 2] ^= 0x55
        Path(entry.path).write_bytes(bytes(data))
    tc.clear_memory_cache()
    cache_stats(reset=True)
    again = compile_kernel(kernels.add, ADD_SPEC, "sm_90")
    stats = cache_stats()
    assert again.origin == "compiled"
    assert again.cubin == first.cubin
    assert (stats.corrupt_evicted, stats.frontend_runs, stats.tileiras_runs) == (2, 1, 1)
    tc.clear_memory_cache()
    assert compile_kernel(kernels.add, ADD_SPEC, "sm_90").origin == "disk"


@pytest.mark.requires_tileiras
def test_the_cubin_is_stored_once_and_its_eviction_means_a_rebuild(kernels: types.ModuleType, tmp_path: Path) -> None:
    first = compile_kernel(kernels.add, ADD_SPEC, "sm_90")
    store = tc.DiskCache(tmp_path / "cache")
    kinds = sorted(Path(e.path).parent.parent.name for e in store.entries())
    assert kinds == ["cubin", "kernel"]
    kernel_entry = next(e for e in store.entries() if "kernel" in e.path)
    assert first.cubin is not None
    assert Path(kernel_entry.path).stat().st_size < len(first.cubin)  # the kernel entry refers to the cubin
    for entry in store.entries():
        if Path(entry.path).parent.parent.name == "cubin":
            Path(entry.path).unlink()
    tc.clear_memory_cache()
    cache_stats(reset=True)
    again = compile_kernel(kernels.add, ADD_SPEC, "sm_90")
    assert (again.origin, cache_stats().frontend_runs, cache_stats().tileiras_runs) == ("compiled", 1, 1)
    assert again.cubin == first.cubin


@pytest.mark.requires_tileiras
def test_ahead_of_time_cache_serves_a_machine_without_tileiras(tmp_path: Path) -> None:
    source = tmp_path / "tile_test_kernels.py"
    source.write_text(KERNELS)
    carried = tmp_path / "carried-cache"
    cli = [
        sys.executable,
        "-m",
        "tile.compiler",
        "compile",
        f"{source}::add",
        "--arch",
        "sm_90",
        "--const",
        "B=128",
        "--cache-dir",
        str(carried),
        "-o",
        str(tmp_path / "out"),
        "--emit",
        "cubin",
    ]
    subprocess.run(cli, check=True, capture_output=True, text=True)
    on_gpu_box = _result(_spawn(source, carried, "hide-tileiras"))
    assert (on_gpu_box["origin"], on_gpu_box["frontend_runs"]) == ("disk", 0)
    assert bytes.fromhex(str(on_gpu_box["cubin"])) == (tmp_path / "out" / "add.cubin").read_bytes()
    empty = _spawn(source, tmp_path / "empty-cache", "hide-tileiras")
    _, err = empty.communicate(timeout=120)
    assert empty.returncode != 0
    assert "tileiras was not found" in err
    assert "TILE_CACHE_DIR" in err


def _built_module() -> tile.ir.Module:
    fn = tile.ir.Function("scale", tile.ir.FunctionType((tile.ir.scalar(tile.ir.f32),)))
    b = tile.ir.Builder(fn.body)
    b.mulf(fn.params[0], fn.params[0])
    b.return_()
    return tile.ir.Module([fn])


def test_compile_module_on_the_cpu_target_stops_at_bytecode() -> None:
    kernel = tc.compile_module(_built_module(), Target.cpu())
    assert kernel.cubin is None
    assert kernel.entry == "scale"
    assert [(s.param, s.dtype) for s in kernel.abi.slots] == [("arg0", "tile<f32>")]
    assert tile.ir.read_bytecode(kernel.bytecode).functions[0].name == "scale"


@pytest.mark.requires_tileiras
def test_compile_module_built_with_the_ir_builder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path))
    kernel = tc.compile_module(_built_module(), "sm_90")
    assert kernel.cubin is not None
    assert kernel.cubin[:4] == b"\x7fELF"
    assert b"scale\x00" in kernel.cubin
    assert tc.compile_module(_built_module(), "sm_90").origin == "disk"


BROKEN = textwrap.dedent(
    """
    import tile.compiler.lang as tl
    from tile.compiler.lang import Mut, Tensor, f32


    def broken(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
        z.store(tl.load_tile_like(x, z) + undefined_name)
    """
)


@pytest.mark.parametrize("debug", ["", "1"])
def test_compile_errors_hide_compiler_frames_unless_tile_debug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, debug: str
) -> None:
    import traceback

    monkeypatch.setenv("TILE_DEBUG", debug)
    source = tmp_path / "tile_broken_kernel.py"
    source.write_text(BROKEN)
    broken = _import(source, "tile_broken_kernel").broken
    with pytest.raises(tc.CompileError) as info:
        compile_kernel(broken, Specialization.make(consts={"B": 128}), Target.cpu(), cache=False)
    frames = [frame.filename for frame in traceback.extract_tb(info.value.__traceback__)]
    internal = [f for f in frames if "tile/compiler/_" in f.replace("\\", "/") and not f.endswith("_api.py")]
    assert bool(internal) == bool(debug)
    assert "undefined_name" in str(info.value)
    assert f"{source}:" in str(info.value)


def test_tile_opt_level_applies_where_options_leave_the_default(
    kernels: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = compile_kernel(kernels.add, ADD_SPEC, Target.cpu())
    monkeypatch.setenv("TILE_OPT_LEVEL", "0")
    lowered = compile_kernel(kernels.add, ADD_SPEC, Target.cpu())
    assert lowered.key != default.key
    explicit = Specialization.make(consts={"B": 128}, options=tc.CompileOptions(opt_level=2))
    assert compile_kernel(kernels.add, explicit, Target.cpu()).key == frontend_key(
        kernels.add, explicit, Target.cpu(), None
    )
