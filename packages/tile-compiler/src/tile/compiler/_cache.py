"""The compile caches: a single-flight in-memory map and a checksummed, size-capped on-disk store.

In memory: `MemoryCache.get_or_compute` runs the computation once per key however many threads ask at the same
time; the others wait and share the result (or the error, which is not cached, so a later call retries).

On disk (`DiskCache`, rooted at ``TILE_CACHE_DIR``): one file per entry under ``v<schema>/<namespace>/<k[:2]>/``.
A file is ``header | metadata JSON | blobs``; the header holds the lengths and a SHA-256 over everything after
it, so a torn, truncated or tampered entry is detected, deleted and treated as a miss. The metadata also names the
entry's own namespace and key, checked against the path it is read from: a file copied, renamed or restored over
another key's entry (a valid checksum, another kernel's ABI and code) is evicted as foreign, never launched. Only a
regular file no larger than the cap is read (a FIFO, device or runaway file planted in the folder is refused).
Entries are written to a temporary file in the same folder and renamed into place, so readers in other processes
see the old entry, the new one, or none, never a partial one; two processes writing the same key both succeed.
`DiskCache.building` is an advisory cross-process lock (``flock`` on one of 256 stripe files) that lets one process
build a key while the others wait for its entry. A hit refreshes the entry's mtime; when a write takes the store
above its cap, the least recently used entries are removed down to 80 % of it. The disk cache never fails a compile:
every I/O error is logged and turns into a miss. The checksum and the key check give integrity, not authenticity:
whoever can write the folder could plant a cubin, or an ABI without the host guards. So every read and write goes
through `tile.compiler._trust`: only folders and files that you own and nobody else can write, reached through no
symbolic link, are used (anything else is a miss and a `CacheTrustWarning`); folders are made 0700, files 0600.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import struct
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Generic, TypeVar

from tile.compiler._trust import UntrustedError, trusted_dir, warn_refused

__all__ = ["KEY_SCHEMA", "CacheEntry", "CacheStats", "DiskCache", "MemoryCache", "cache_stats", "count"]

KEY_SCHEMA = 4
"""Version of the key derivation and entry layout; bump it whenever either changes."""
_MAGIC = b"TILEC\x00\x01\n"
_HEADER = struct.Struct("<8sIQ32s")  # magic, metadata length, blob length, sha256(metadata + blobs)
_LOW_WATER = 0.8
_log = logging.getLogger("tile.compiler")
K = TypeVar("K")
V = TypeVar("V")


@dataclass
class CacheStats:
    """Process-wide counters (a snapshot from `cache_stats`)."""

    memory_hits: int = 0
    disk_hits: int = 0
    frontend_runs: int = 0
    cubin_disk_hits: int = 0
    tileiras_runs: int = 0
    corrupt_evicted: int = 0
    lru_evicted: int = 0


_STATS = CacheStats()
_STATS_LOCK = threading.Lock()


def count(name: str, n: int = 1) -> None:
    """Add ``n`` to counter ``name`` of the process-wide `CacheStats`."""
    with _STATS_LOCK:
        setattr(_STATS, name, getattr(_STATS, name) + n)


def cache_stats(reset: bool = False) -> CacheStats:
    """Return a copy of the process-wide counters; ``reset=True`` zeroes them afterwards."""
    with _STATS_LOCK:
        snapshot = CacheStats(**{f.name: getattr(_STATS, f.name) for f in fields(CacheStats)})
        if reset:
            for f in fields(CacheStats):
                setattr(_STATS, f.name, 0)
        return snapshot


class _Slot(Generic[V]):
    def __init__(self) -> None:
        self.done = threading.Event()
        self.owner = threading.get_ident()
        self.value: V | None = None
        self.error: BaseException | None = None


class MemoryCache(Generic[K, V]):
    """A thread-safe map whose values are computed at most once per key at a time (single flight)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[K, _Slot[V]] = {}

    def get_or_compute(self, key: K, compute: Callable[[], V]) -> tuple[V, bool]:
        """Return ``(value, hit)``: the cached value, or the result of ``compute()`` stored under ``key``."""
        with self._lock:
            slot = self._slots.get(key)
            owner = slot is None
            if slot is None:
                slot = self._slots[key] = _Slot()
        if not owner:
            if slot.owner == threading.get_ident() and not slot.done.is_set():
                raise RecursionError(f"compiling {key!r} needs its own result")
            slot.done.wait()
            if slot.error is not None:
                raise slot.error
            return slot.value, True  # type: ignore[return-value]  # set before done, V may itself be None
        try:
            slot.value = compute()
        except BaseException as exc:
            slot.error = exc
            with self._lock:
                self._slots.pop(key, None)
            raise
        finally:
            slot.done.set()
        return slot.value, False

    def clear(self) -> None:
        """Forget every finished entry (computations in flight finish for their waiters)."""
        with self._lock:
            self._slots = {k: s for k, s in self._slots.items() if not s.done.is_set()}

    def __len__(self) -> int:
        with self._lock:
            return len(self._slots)


@dataclass(frozen=True)
class CacheEntry:
    """A disk-cache entry: JSON metadata and named binary blobs."""

    meta: Mapping[str, Any]
    blobs: Mapping[str, bytes]


class DiskCache:
    """A content store under ``root``; see the module docstring for the format and the guarantees.

    Parameters
    ----------
    root
        The cache directory (``TILE_CACHE_DIR``).
    max_bytes
        Size cap; the least recently used entries go first.
    shared
        Also trust folders and entries owned by root (``TILE_CACHE_SHARED=1``: a read-only system-wide cache).
    """

    def __init__(self, root: Path, max_bytes: int = 1 << 30, *, shared: bool = False) -> None:
        self.root = Path(root)
        self.base = self.root / f"v{KEY_SCHEMA}"
        self.max_bytes = max_bytes
        self.shared = shared

    def path(self, namespace: str, key: str) -> Path:
        """Where the entry ``key`` of ``namespace`` lives."""
        return self.base / namespace / key[:2] / f"{key}.entry"

    def get(self, namespace: str, key: str) -> CacheEntry | None:
        """Return the entry, or None when absent, unreadable or corrupt (a corrupt one is deleted)."""
        return self.load(self.path(namespace, key))

    def find(self, namespace: str, prefix: str) -> CacheEntry | None:
        """Return the most recently used valid entry whose key starts with ``prefix`` (len >= 2), or None."""
        folder_parts = (self.base.name, namespace, prefix[:2])
        try:
            with trusted_dir(self.root, folder_parts, shared=self.shared) as folder:
                found = [(folder.mtime(n), n) for n in folder.names() if n.startswith(prefix)]
        except UntrustedError as refused:
            warn_refused(refused)
            return None
        except OSError:
            return None
        for _, name in sorted(found, reverse=True):
            if (entry := self.load(self.root.joinpath(*folder_parts, name))) is not None:
                return entry
        return None

    def put(self, namespace: str, key: str, meta: Mapping[str, Any], blobs: Mapping[str, bytes]) -> bool:
        """Store an entry atomically; return False (after logging why) if it could not be written."""
        path = self.path(namespace, key)
        own = {"blobs": [[n, len(b)] for n, b in blobs.items()], "entry": [namespace, key]}
        meta_bytes = json.dumps({**meta, **own}, sort_keys=True).encode()
        body = b"".join(blobs.values())
        digest = hashlib.sha256(meta_bytes + body).digest()
        try:
            with trusted_dir(self.root, path.relative_to(self.root).parts[:-1], create=True, shared=self.shared) as d:
                d.write(path.name, _HEADER.pack(_MAGIC, len(meta_bytes), len(body), digest) + meta_bytes + body)
        except UntrustedError as refused:
            warn_refused(refused)
            return False
        except OSError as exc:
            _log.warning("tile: could not write cache entry %s (%s); continuing without it", path, exc)
            return False
        self._enforce_cap()
        return True

    @contextlib.contextmanager
    def building(self, key: str) -> Iterator[None]:
        """Hold, across processes, the right to build ``key`` (one of 256 lock stripes; never fatal).

        Ranks of one job often start by compiling the same kernels: the first builds, the others wait here and
        then find its entry. Without a writable folder (a carried read-only cache) this does not lock.
        """
        with contextlib.ExitStack() as stack:
            try:
                folder = stack.enter_context(trusted_dir(self.root, (self.base.name,), create=True, shared=self.shared))
                handle = folder.open_lock(f".build-{key[:2]}.lock")
            except UntrustedError as refused:
                warn_refused(refused)
                handle = None
            except OSError:
                handle = None
            if handle is None:
                stack.close()
                yield
                return
            stack.callback(os.close, handle)
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def entries(self) -> Iterator[os.DirEntry[str]]:
        """Every entry file (for sizing, listing and eviction); none of an untrusted cache, no link followed."""
        try:
            with trusted_dir(self.root, (self.base.name,), shared=self.shared):
                pass
            namespaces = list(os.scandir(self.base))
        except UntrustedError as refused:
            warn_refused(refused)
            return
        except OSError:
            return
        for ns in namespaces:
            for shard in _scan(ns):
                yield from (e for e in _scan(shard) if e.name.endswith(".entry"))

    def size(self) -> int:
        """Total bytes of all entries."""
        return sum(_size(e) for e in self.entries())

    def clear(self) -> int:
        """Delete every entry; return how many were removed."""
        removed = 0
        for entry in list(self.entries()):
            removed += _unlink(Path(entry.path))
        return removed

    def load(self, path: Path) -> CacheEntry | None:
        """Read the entry file ``path`` (as `entries` lists them); None if gone, untrusted or corrupt (then evicted)."""
        try:
            parts = path.relative_to(self.root).parts
            with trusted_dir(self.root, parts[:-1], shared=self.shared) as folder:
                entry = _decode(folder.read(parts[-1], self.max_bytes), [parts[-3], parts[-1].removesuffix(".entry")])
                if entry is None:
                    _log.warning("tile: cache entry %s is corrupt; evicting it and recompiling", path)
                    count("corrupt_evicted", folder.unlink(parts[-1]))
                    return None
                folder.touch(parts[-1])
                return entry
        except UntrustedError as refused:
            warn_refused(refused)
        except (OSError, ValueError, IndexError):  # gone, unreadable, or not a path under the root
            pass
        return None

    def _enforce_cap(self) -> None:
        items = [(e, _size(e)) for e in self.entries()]
        total = sum(size for _, size in items)
        if total <= self.max_bytes:
            return
        for item, size in sorted(items, key=lambda pair: _mtime(pair[0])):
            if total <= self.max_bytes * _LOW_WATER:
                break
            if _unlink(Path(item.path)):
                total -= size
                count("lru_evicted")


def _decode(data: bytes | None, identity: list[str]) -> CacheEntry | None:
    """The entry in ``data`` if it is whole, intact and is the entry ``identity`` (namespace, key), else None."""
    if data is None or len(data) < _HEADER.size:
        return None
    magic, meta_len, body_len, digest = _HEADER.unpack_from(data)
    payload = data[_HEADER.size :]
    if magic != _MAGIC or len(payload) != meta_len + body_len or hashlib.sha256(payload).digest() != digest:
        return None
    try:
        meta = json.loads(payload[:meta_len])
        if not isinstance(meta, dict) or meta.pop("entry", None) != identity:
            return None  # not an object, or another key's entry (copied or renamed here): foreign, never used
        blobs, offset = {}, meta_len
        for name, length in meta.pop("blobs"):
            if type(length) is not int or length < 0 or offset + length > len(payload):
                return None
            blobs[str(name)] = payload[offset : offset + length]
            offset += length
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    return CacheEntry(meta, blobs) if offset == len(payload) else None


def _scan(folder: os.DirEntry[str]) -> list[os.DirEntry[str]]:
    """The visible entries of the real folder ``folder`` (a link to a folder is not entered)."""
    try:
        if not folder.is_dir(follow_symlinks=False):
            return []
        return [e for e in os.scandir(folder.path) if not e.name.startswith(".") and not e.is_symlink()]
    except OSError:
        return []


def _size(entry: os.DirEntry[str]) -> int:
    try:
        return entry.stat().st_size
    except OSError:
        return 0


def _mtime(entry: os.DirEntry[str]) -> int:
    try:
        return entry.stat().st_mtime_ns
    except OSError:
        return 0


def _unlink(path: Path) -> int:
    try:
        path.unlink()
    except OSError:
        return 0
    return 1
