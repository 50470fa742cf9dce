"""The autotuner: pick the fastest config of a kernel family once per key, and remember it on disk.

A key names what the choice depends on (the family, shape buckets, dtypes, device arch); `Autotuner.choose` returns
the remembered winner for it, or times every candidate with the tuner's timer, keeps the fastest (the first listed on
a tie) and writes it to ``<cache dir>/v<FORMAT>/<family>.json``. A record is used only when its format, tile-kernels
version and kernel-source digest match this process's and its config is still a candidate; anything else (an old
file, a corrupt file, a hand-edited config) is ignored and re-tuned, never trusted. Without a timer (the CPU
interpreter, where timing means nothing) or with ``TILE_AUTOTUNE=0`` the family's deterministic default is used and
nothing is written.

Files are replaced atomically (write to a temporary file, then ``os.replace``), so a reader never sees half a file;
two processes tuning at once may each write, and the last writer's records win, which costs at most a re-tune. A
record steers which kernel config runs, so it is read and written only under the compile cache's trust rules (see
`tile.compiler.CacheTrustWarning`): a file you own, in folders nobody else can write, reached through no symbolic
link; anything else is ignored with one warning and re-tuned.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tile.frontend as tile
from tile import aio
from tile.compiler import CompileError, TileirasError
from tile.compiler._trust import UntrustedError, trusted_dir, warn_refused
from tile.frontend import ArgumentError
from tile.kernels import _knobs

__all__ = [
    "FORMAT",
    "VERSION",
    "Autotuner",
    "Config",
    "Timer",
    "bucket",
    "device_arch",
    "environment",
    "environment_items",
    "fine_bucket",
    "interleaved_wall_times",
    "set_tuner",
    "tuner",
    "wall_timer",
]

FORMAT = 1
VERSION = "0.1.0"
_MAX_RECORDS_BYTES = 16 << 20  # a records file past this is not read (a real one holds a few KiB per family)
_RECALL_CAP = 4096  # stand-in keys an Autotuner keeps for `recall` (the keys' buckets bound its remembered choices)

Timer = Callable[[Callable[[], object]], float]
"""Seconds one call of the given function takes (it runs it as often as it needs)."""
Race = Callable[[Sequence[Callable[[], object]]], list["float | None"]]
"""Seconds one call of each given function takes, timed together (None: that one does not compile)."""


@dataclass(frozen=True)
class Config:
    """One candidate configuration: named integer parameters (tile sizes, group, split-K, rows per block).

    The names are strings and the values exact Python ints (`ArgumentError` otherwise, when the config is made)."""

    values: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        # Exact ints only: the families check a config once and cache the verdict (and the plan) by the config, and a
        # float 16.0 or a bool True compares and hashes equal to an int, so it would skip the check it never passed.
        for item in self.values:
            if type(item) is not tuple or len(item) != 2 or type(item[0]) is not str:
                raise ArgumentError(f"autotune.Config: {item!r}: parameter names are strings, e.g. Config.of(BM=128)")
            if type(item[1]) is not int:
                raise ArgumentError(
                    f"autotune.Config: {item[0]}={item[1]!r} is not an int ({type(item[1]).__name__}); tile sizes, "
                    "counts and hints are Python ints"
                )

    @classmethod
    def of(cls, **values: int) -> Config:
        """``Config.of(BM=128, BN=128, BK=64)``."""
        return cls(tuple(sorted(values.items())))

    @functools.cached_property
    def _map(self) -> dict[str, int]:
        # Read per launch (a GEMV launch reads seven parameters): one dict made once instead of a scan each time.
        return dict(self.values)

    def __getitem__(self, name: str) -> int:
        return self._map[name]

    def as_dict(self) -> dict[str, int]:
        """The parameters as a plain dict (a new one: the caller may change it)."""
        return dict(self._map)

    def get(self, name: str, default: int) -> int:
        """The parameter ``name``, or ``default`` when the config has none."""
        return self._map.get(name, default)

    def __str__(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values)


def bucket(n: int) -> int:
    """The shape bucket of an extent: itself up to 16 (decode sizes matter one by one), else the next power of two."""
    return n if n <= 16 else 1 << (n - 1).bit_length()


def fine_bucket(n: int) -> int:
    """A finer shape bucket, for extents whose best config changes within an octave (decode GEMV's N and K): itself
    up to 16, else ``n`` rounded up to a multiple of a quarter of the power of two below it, so four buckets per
    octave (2560, 6144, 8192 and 9728 -> 10240 are all distinct; a bucket's extents are within 25% of each other)."""
    if n <= 16:
        return n
    step = 1 << ((n - 1).bit_length() - 3)
    return -(-n // step) * step


def wall_timer(fn: Callable[[], object]) -> float:
    """Median wall time of ``fn`` (which waits for its GPU work) over 5 samples, after one warm-up call."""
    fn()  # compiles and warms caches
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-6)
    reps = max(1, min(50, int(2e-3 / once)))
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        samples.append((time.perf_counter() - start) / reps)
    return statistics.median(samples)


def interleaved_wall_times(
    fns: Sequence[Callable[[], object]], *, rounds: int = 7, clock: Callable[[], float] = time.perf_counter
) -> list[float | None]:
    """Median wall time of one call of each of ``fns`` (each waits for its GPU work), their samples interleaved.

    Each function is called once to compile and warm up (one raising `CompileError` or `TileirasError` gets None),
    once more to size its sample (enough back-to-back calls for about 2 ms, at most 50), then ``rounds`` rounds take
    one sample of every function in turn, each round starting one function later, so clock drift and a neighbour's
    load hit every candidate alike instead of whichever was timed last. A function timing a short kernel should chain
    several launches and wait once (what the attention and decode-GEMV tuners run), so the host round trip of a wait
    is not timed as if it were the kernel's.
    """
    live: list[int] = []
    for i, fn in enumerate(fns):
        try:
            fn()
        except (CompileError, TileirasError):
            continue  # a config the compiler or tileiras cannot build (too big a tile...) is no candidate
        live.append(i)
    reps: dict[int, int] = {}
    for i in live:
        start = clock()
        fns[i]()
        reps[i] = max(1, min(50, int(2e-3 / max(clock() - start, 1e-6))))
    samples: dict[int, list[float]] = {i: [] for i in live}
    for r in range(rounds if live else 0):
        shift = r % len(live)
        for i in live[shift:] + live[:shift]:
            start = clock()
            for _ in range(reps[i]):
                fns[i]()
            samples[i].append((clock() - start) / reps[i])
    return [statistics.median(samples[i]) if i in samples else None for i in range(len(fns))]


class Autotuner:
    """Chooses among a kernel family's configs, once per key.

    Parameters
    ----------
    family
        The kernel family (``"matmul"``, ``"softmax"``...): the records' file name.
    source
        A digest of the family's kernel source; records made for other source are ignored.
    timer
        How candidates are timed; None means "do not tune" (the default config is used).
    cache_dir
        Where records are kept; None keeps them in memory only.
    race
        How candidates are timed together when `choose` is asked to interleave (see `interleaved_wall_times`);
        None times them one after another with ``timer``.
    """

    def __init__(
        self, family: str, *, source: str, timer: Timer | None, cache_dir: Path | None, race: Race | None = None
    ) -> None:
        self.family, self.source, self.timer, self.cache_dir, self.race = family, source, timer, cache_dir, race
        self._memory: dict[str, Config] = {}
        self._recalled: dict[Hashable, Config] = {}
        self._lock = threading.Lock()
        self.tuned = 0  # how many keys this tuner timed (tests and the benchmark read it)

    def remembered(self) -> dict[str, Config]:
        """The configs chosen in this process (tuned or read from disk), by key (JSON text)."""
        with self._lock:
            return dict(self._memory)

    @property
    def path(self) -> Path | None:
        """The records file, or None."""
        return None if self.cache_dir is None else self.cache_dir / f"v{FORMAT}" / f"{self.family}.json"

    def choose(
        self,
        key: Mapping[str, object],
        candidates: Sequence[Config],
        default: Config,
        run: Callable[[Config], object],
        *,
        interleave: bool = False,
        recall: Hashable = None,
    ) -> Config:
        """The config to use for ``key``: remembered, tuned now (``run(config)`` does one full call), or ``default``.

        ``interleave`` times the candidates together with the tuner's ``race`` (samples interleaved, medians
        compared), for families whose candidates differ by less than a GPU's clock drift over a tuning.
        ``recall``: a hashable stand-in for ``key`` (a tuple of the call's raw parameters and `environment_items`)
        under which a remembered or tuned choice is also kept, for `recall` to find without building the key, the
        candidates and the default again (a family asks on every call: that work cost ~100 µs of host time a call).
        """
        if not candidates:
            raise ArgumentError(f"autotune {self.family}: no candidate configs")
        if self.timer is None or not _knobs.autotune_enabled():
            return default
        text = json.dumps(dict(key), sort_keys=True, default=str)
        with self._lock:
            found = self._memory.get(text) or self._load(text, candidates)
            if found is None and aio.executing():
                # Inside a chain's function (a .then() step building the next launch): tuning would block on the
                # device the chain is running on (ExecutionLockError). Use the default now, remember nothing, so a
                # call outside a chain still tunes this key.
                return default
            if found is None:
                found = self._tune(text, candidates, default, run, interleave)
            self._memory[text] = found
            if recall is not None:
                if len(self._recalled) >= _RECALL_CAP:  # raw parameters (every prompt length) must not grow it forever
                    self._recalled.clear()
                self._recalled[recall] = found
            return found

    def recall(self, recall: Hashable) -> Config | None:
        """The config `choose` chose for a call it was given ``recall=recall`` for, or None: not chosen yet, or tuning
        is off now (no timer, ``TILE_AUTOTUNE=0``: `choose` would return the default). ``recall`` must determine the
        key `choose` builds (the same parameters and environment give the same key), so the answer is the one
        `choose` would give; a None means "call `choose`"."""
        if self.timer is None or not _knobs.autotune_enabled():
            return None
        return self._recalled.get(recall)

    def _tune(
        self,
        text: str,
        candidates: Sequence[Config],
        default: Config,
        run: Callable[[Config], object],
        interleave: bool,
    ) -> Config:
        assert self.timer is not None
        if not _knobs.quiet():
            print(f"tile.kernels: tuning {self.family} for {text} ({len(candidates)} configs)", file=sys.stderr)
        timings: list[tuple[float, int, Config]] = []
        if interleave and self.race is not None:
            raced = self.race([functools.partial(run, config) for config in candidates])
            timings = [
                (t, order, c) for order, (t, c) in enumerate(zip(raced, candidates, strict=True)) if t is not None
            ]
        else:
            for order, config in enumerate(candidates):
                try:
                    seconds = self.timer(functools.partial(run, config))
                except (CompileError, TileirasError):
                    continue  # a config the compiler or tileiras cannot build (too big a tile...) is no candidate
                timings.append((seconds, order, config))
        self.tuned += 1
        if not timings:
            return default
        seconds, _, best = min(timings, key=lambda item: (item[0], item[1]))
        self._store(text, best, seconds, len(timings))
        return best

    # -- disk -------------------------------------------------------------------------------------------------------

    def _records(self) -> dict[str, Any]:
        if self.cache_dir is None:
            return {}
        try:  # only a file you own in folders nobody else can write (tile.compiler's cache trust rules)
            with trusted_dir(self.cache_dir, (f"v{FORMAT}",), shared=_knobs.cache_shared()) as folder:
                raw = folder.read(f"{self.family}.json", _MAX_RECORDS_BYTES)
            data = json.loads(raw) if raw is not None else None
        except UntrustedError as refused:
            warn_refused(refused)
            return {}
        except (OSError, ValueError, RecursionError):  # absent, unreadable, too big, not JSON, nested too deep
            return {}
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
            return {}
        records = data.get("records")
        return records if isinstance(records, dict) else {}

    def _load(self, text: str, candidates: Sequence[Config]) -> Config | None:
        record = self._records().get(text)
        if not isinstance(record, dict) or record.get("source") != self.source:
            return None
        values = record.get("config")
        if not isinstance(values, dict):
            return None
        for config in candidates:
            if config.as_dict() == values:
                return config
        return None

    def _store(self, text: str, config: Config, seconds: float, timed: int) -> None:
        if self.cache_dir is None:
            return
        records = self._records()
        records[text] = {"config": config.as_dict(), "seconds": seconds, "timed": timed, "source": self.source}
        data = {"format": FORMAT, "version": VERSION, "family": self.family, "records": records}
        body = json.dumps(data, indent=1, sort_keys=True).encode()
        try:  # folders 0700, a 0600 temporary file renamed into place, no link followed
            with trusted_dir(self.cache_dir, (f"v{FORMAT}",), create=True, shared=_knobs.cache_shared()) as folder:
                folder.write(f"{self.family}.json", body)
        except UntrustedError as refused:
            warn_refused(refused)
        except OSError:  # an unwritable cache costs a re-tune in the next process, nothing else
            pass


_TUNERS: dict[tuple[str, str], Autotuner] = {}
_TUNERS_LOCK = threading.Lock()


def tuner(family: str, source: str) -> Autotuner:
    """The tuner a kernel family uses on the current backend: timed on the GPU, the default config on the CPU."""
    key = (family, tile.backend())
    with _TUNERS_LOCK:
        found = _TUNERS.get(key)
        if found is None:
            gpu = key[1] == "gpu"
            timer, race = (wall_timer, interleaved_wall_times) if gpu else (None, None)
            found = _TUNERS[key] = Autotuner(
                family, source=source, timer=timer, cache_dir=_knobs.cache_dir(), race=race
            )
        return found


def set_tuner(family: str, new: Autotuner | None) -> Autotuner | None:
    """Make ``new`` the tuner of ``family`` on the current backend (None: back to the built-in); return the old one.

    For tests and for users who bring their own timer (CUDA events, L2 flushing) or cache directory.
    """
    key = (family, tile.backend())
    with _TUNERS_LOCK:
        old = _TUNERS.pop(key, None)
        if new is not None:
            _TUNERS[key] = new
        return old


_ENVIRONMENTS: dict[tuple[str | None, ...], tuple[tuple[str, str], ...]] = {}
_FINDS_TILEIRAS = ("TILE_TILEIRAS", "CUDA_HOME", "PATH")
"""The settings that decide which tileiras `tile.compiler.toolchain` finds (`tile.compiler.find_tileiras`)."""


def environment() -> dict[str, str]:
    """What a tuned choice depends on besides the call: the device arch and, on the GPU, the tileiras version.

    Worked out once per backend and setting of the variables that locate tileiras (``TILE_TILEIRAS``, ``CUDA_HOME``,
    ``PATH``) in a process. The families build their tuning key on every call, and finding tileiras (a read of its
    package's metadata and a search of ``PATH``) cost about 1 ms a call on the host, more than a 1k-token FMHA.
    """
    return dict(environment_items())


def environment_items() -> tuple[tuple[str, str], ...]:
    """`environment` as sorted ``(name, value)`` pairs: hashable, for a family's `Autotuner.recall` key."""
    get = os.environ.get
    key = (tile.backend(), *[get(name) for name in _FINDS_TILEIRAS])
    found = _ENVIRONMENTS.get(key)
    if found is None:
        found = _ENVIRONMENTS[key] = tuple(sorted(_probe_environment().items()))
    return found


def _probe_environment() -> dict[str, str]:
    arch = device_arch()
    if arch == "cpu":
        return {"arch": arch}
    from tile.compiler import toolchain

    return {"arch": arch, "tileiras": toolchain().version}


def device_arch() -> str:
    """``"sm_90"`` and the like for the GPU backend's device 0; ``"cpu"`` on the interpreter."""
    if tile.backend() != "gpu":
        return "cpu"
    from tile import core

    return str(core.Device(0).arch)
