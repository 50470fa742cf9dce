"""The caches: single-flight memory cache, checksummed LRU disk store, and both under real tileiras runs."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tile.compiler import DiskCache, MemoryCache, cache_stats, compile_bytecode, knobs

sys.path.insert(0, str(Path(__file__).parent))
from helpers_compiler_child import json_result, spawn

# The smallest valid Tile IR module (13.3, no functions): tileiras turns it into a real, if empty, cubin.
EMPTY_MODULE = bytes.fromhex(
    "7f54696c6549520 00d030000 820108cb00 850e0402cbcbcb000000000100000000 03 810104cbcbcb00 00".replace(" ", "")
)


def test_memory_cache_computes_once_for_concurrent_callers() -> None:
    cache: MemoryCache[str, int] = MemoryCache()
    calls = 0
    gate = threading.Event()

    def slow() -> int:
        nonlocal calls
        calls += 1
        gate.wait(5)
        return 42

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(cache.get_or_compute, "k", slow) for _ in range(8)]
        time.sleep(0.05)
        gate.set()
        results = [f.result() for f in futures]
    assert calls == 1
    assert sorted(hit for _, hit in results) == [False] + [True] * 7
    assert {value for value, _ in results} == {42}


def test_memory_cache_shares_an_error_then_retries() -> None:
    cache: MemoryCache[str, int] = MemoryCache()
    attempts = 0

    def failing() -> int:
        nonlocal attempts
        attempts += 1
        raise ValueError("broken kernel")

    for _ in range(2):
        with pytest.raises(ValueError, match="broken kernel"):
            cache.get_or_compute("k", failing)
    assert attempts == 2
    assert cache.get_or_compute("k", lambda: 7) == (7, False)
    cache.clear()
    assert len(cache) == 0


def test_memory_cache_detects_self_recursion() -> None:
    cache: MemoryCache[str, int] = MemoryCache()
    with pytest.raises(RecursionError, match="needs its own result"):
        cache.get_or_compute("k", lambda: cache.get_or_compute("k", lambda: 1)[0])


@pytest.fixture
def store(tmp_path: Path) -> DiskCache:
    return DiskCache(tmp_path / "cache", max_bytes=1 << 20)


def test_disk_cache_round_trip_and_miss(store: DiskCache) -> None:
    assert store.get("cubin", "ab" * 32) is None
    assert store.put("cubin", "ab" * 32, {"kernel": "k"}, {"cubin": b"\x7fELF" + bytes(100), "extra": b""})
    entry = store.get("cubin", "ab" * 32)
    assert entry is not None
    assert entry.meta == {"kernel": "k"}
    assert entry.blobs == {"cubin": b"\x7fELF" + bytes(100), "extra": b""}


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "garbage"])
def test_disk_cache_evicts_a_corrupt_entry(store: DiskCache, damage: str) -> None:
    key = "cd" * 32
    store.put("cubin", key, {"kernel": "k"}, {"cubin": bytes(range(256))})
    path = store.path("cubin", key)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-10] ^= 0xFF
    elif damage == "truncate":
        data = data[:-1]
    elif damage == "empty":
        data = bytearray()
    else:
        data = bytearray(b"not a cache entry at all" * 4)
    path.write_bytes(bytes(data))
    before = cache_stats().corrupt_evicted
    assert store.get("cubin", key) is None
    assert not path.exists()
    assert cache_stats().corrupt_evicted == before + 1


def test_disk_cache_find_prefers_the_most_recent(store: DiskCache) -> None:
    store.put("kernel", "ee" * 32 + "-old", {"n": 1}, {})
    os.utime(store.path("kernel", "ee" * 32 + "-old"), (1, 1))
    store.put("kernel", "ee" * 32 + "-new", {"n": 2}, {})
    found = store.find("kernel", "ee" * 32 + "-")
    assert found is not None
    assert found.meta == {"n": 2}
    assert store.find("kernel", "ff" * 32) is None


def test_disk_cache_lru_keeps_recently_used_entries_under_the_cap(tmp_path: Path) -> None:
    store = DiskCache(tmp_path, max_bytes=10_000)
    keys = [f"{i:02x}" * 32 for i in range(8)]
    for i, key in enumerate(keys):
        store.put("cubin", key, {}, {"cubin": bytes(2000)})
        os.utime(store.path("cubin", key), (1000 + i, 1000 + i))
        if i == 3:
            assert store.get("cubin", keys[0]) is not None  # touch: keys[0] becomes most recent
            os.utime(store.path("cubin", keys[0]), (5000, 5000))
    assert store.size() <= 10_000
    assert store.get("cubin", keys[0]) is not None
    assert store.get("cubin", keys[-1]) is not None
    assert store.get("cubin", keys[1]) is None


def test_disk_cache_concurrent_writers_of_one_key_all_succeed(store: DiskCache) -> None:
    key = "aa" * 32

    def write(i: int) -> bool:
        return store.put("cubin", key, {"writer": i % 2}, {"cubin": bytes([i % 2]) * 50_000})

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(write, range(32)))
    entry = store.get("cubin", key)
    assert entry is not None
    assert entry.blobs["cubin"] == bytes([entry.meta["writer"]]) * 50_000
    assert not [p for p in store.path("cubin", key).parent.iterdir() if p.name.endswith(".tmp")]


def test_disk_cache_write_failure_is_not_fatal(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    store = DiskCache(blocker)
    assert store.put("cubin", "aa" * 32, {}, {"cubin": b"x"}) is False
    assert store.get("cubin", "aa" * 32) is None


def test_building_lets_one_builder_of_a_key_in_at_a_time(store: DiskCache) -> None:
    order: list[str] = []

    def build(tag: str) -> None:
        with store.building("ab" * 32):
            order.append(f"{tag}-in")
            time.sleep(0.05)
            order.append(f"{tag}-out")

    threads = [threading.Thread(target=build, args=(tag,)) for tag in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert order in (["a-in", "a-out", "b-in", "b-out"], ["b-in", "b-out", "a-in", "a-out"])


def test_building_without_a_writable_folder_does_not_lock(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = DiskCache(blocker)
    with store.building("ab" * 32), store.building("ab" * 32):  # would deadlock if it locked
        pass
    assert blocker.is_file(), "the file standing where the cache folder should be is left alone"
    assert blocker.read_text() == ""


def test_clear_removes_everything(store: DiskCache) -> None:
    for i in range(3):
        store.put("cubin", f"{i:02x}" * 32, {}, {"cubin": b"x"})
    assert store.clear() == 3
    assert list(store.entries()) == []


# --- real tileiras behind the caches -------------------------------------------------------------------------

_CHILD = """
import json, sys
import tile.compiler as c
kernel = c.compile_bytecode(open(sys.argv[1], "rb").read(), "sm_90", name="empty")
stats = c.cache_stats()
print(json.dumps({"origin": kernel.origin, "tileiras_runs": stats.tileiras_runs, "elf": kernel.cubin[:4].hex()}))
"""


@pytest.fixture
def cache_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "tile-cache"
    monkeypatch.setenv("TILE_CACHE_DIR", str(folder))
    return folder


def _child(bytecode_file: Path, cache_dir: Path) -> subprocess.Popen[str]:
    return spawn(_CHILD, [str(bytecode_file)], {**os.environ, "TILE_CACHE_DIR": str(cache_dir)})


def _result(proc: subprocess.Popen[str]) -> dict[str, object]:
    return json_result(proc, timeout=120)


@pytest.mark.requires_tileiras
def test_a_second_process_hits_the_disk_cache(tmp_path: Path) -> None:
    source = tmp_path / "empty.tilebc"
    source.write_bytes(EMPTY_MODULE)
    first = _result(_child(source, tmp_path / "c"))
    second = _result(_child(source, tmp_path / "c"))
    assert first == {"origin": "compiled", "tileiras_runs": 1, "elf": "7f454c46"}
    assert second == {"origin": "disk", "tileiras_runs": 0, "elf": "7f454c46"}


@pytest.mark.requires_tileiras
def test_two_processes_compiling_at_once_both_succeed(tmp_path: Path) -> None:
    source = tmp_path / "empty.tilebc"
    source.write_bytes(EMPTY_MODULE)
    procs = [_child(source, tmp_path / "c") for _ in range(3)]
    results = [_result(p) for p in procs]
    assert all(r["elf"] == "7f454c46" for r in results)
    assert _result(_child(source, tmp_path / "c"))["origin"] == "disk"


@pytest.mark.requires_tileiras
def test_a_corrupt_cubin_entry_is_evicted_and_recompiled(cache_env: Path) -> None:
    first = compile_bytecode(EMPTY_MODULE, "sm_90", name="empty")
    entries = list(DiskCache(cache_env).entries())
    assert len(entries) == 1
    Path(entries[0].path).write_bytes(b"\x00" * 64)
    runs = cache_stats().tileiras_runs
    again = compile_bytecode(EMPTY_MODULE, "sm_90", name="empty")
    assert again.origin == "compiled"
    assert again.cubin == first.cubin
    assert cache_stats().tileiras_runs == runs + 1
    assert compile_bytecode(EMPTY_MODULE, "sm_90", name="empty").origin == "disk"


@pytest.mark.requires_tileiras
def test_cache_off_runs_tileiras_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_CACHE_DIR", "off")
    assert knobs().cache_dir is None
    runs = cache_stats().tileiras_runs
    for _ in range(2):
        assert compile_bytecode(EMPTY_MODULE, "sm_90").origin == "compiled"
    assert cache_stats().tileiras_runs == runs + 2


@pytest.mark.requires_tileiras
def test_cubin_key_separates_archs_and_options(cache_env: Path) -> None:
    from tile.compiler import CompileOptions

    compile_bytecode(EMPTY_MODULE, "sm_90")
    assert compile_bytecode(EMPTY_MODULE, "sm_80").origin == "compiled"
    assert compile_bytecode(EMPTY_MODULE, "sm_90", options=CompileOptions(opt_level=1)).origin == "compiled"
    assert compile_bytecode(EMPTY_MODULE, "sm_90").origin == "disk"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    meta=st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), max_size=4),
    blobs=st.dictionaries(st.text(min_size=1, max_size=8), st.binary(max_size=300), max_size=3),
    flip=st.integers(min_value=0),
)
def test_a_damaged_entry_never_reads_back_as_data(
    tmp_path: Path, meta: dict[str, object], blobs: dict[str, bytes], flip: int
) -> None:
    store = DiskCache(tmp_path / f"prop-{flip}")
    key = "ab" * 32
    assert store.put("cubin", key, meta, blobs)
    entry = store.get("cubin", key)
    assert entry is not None
    assert (dict(entry.meta), dict(entry.blobs)) == (meta, blobs)
    path = store.path("cubin", key)
    data = bytearray(path.read_bytes())
    data[flip % len(data)] ^= 1 << (flip % 8)
    path.write_bytes(bytes(data))
    assert store.get("cubin", key) is None
    assert not path.exists()
