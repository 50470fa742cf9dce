"""Interleaved A/B(/C...) timing: `compare`, its `Comparison`, and the round orders.

Contenders are timed in rounds; each round times every contender ``reps`` times, one after the other, so drift of
the GPU or the host (clocks, other processes) hits all alike. On a GPU what ran just before a contender matters: a
fixed order gives each contender the same predecessor every round, and on an H100 the same kernel measured 4-10%
apart by its place in the order (``benchmarks/bench_lang_fmha.py``, "Order bias"). So rounds are ``"shuffled"`` by
default, a fresh permutation per round drawn from ``seed`` (reproducible); ``"fixed"`` and ``"reversed"`` exist to
show the bias. A contender that raises is recorded with its error and left out of later rounds; the others go on.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tile.frontend import ArgumentError
from tile.kernels.bench._load import entry, mapping, number, read_json, strings, text
from tile.kernels.bench._provenance import provenance
from tile.kernels.bench._timer import Sample, Timer, check_count

__all__ = ["METRICS", "ORDERS", "Comparison", "compare", "round_orders"]

ORDERS = ("shuffled", "fixed", "reversed")
"""The round orders `compare` takes."""

METRICS = ("ms", "TFLOP/s", "GB/s")
"""What `Comparison.value` (and `plot`) can report per contender."""


def round_orders(count: int, rounds: int, order: str = "shuffled", seed: int = 0) -> list[list[int]]:
    """The order in which each of ``rounds`` rounds visits ``count`` contenders (indices): ``"fixed"`` (as given,
    every round), ``"reversed"`` (backwards, every round) or ``"shuffled"`` (a fresh permutation each round, drawn
    from ``seed``: the same seed gives the same rounds)."""
    if order not in ORDERS:
        raise ArgumentError(f"bench: order={order!r} is not one of {', '.join(ORDERS)}")
    check_count(count, "the number of contenders", 1)
    check_count(rounds, "rounds", 1)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ArgumentError(f"bench: seed must be an int, got {seed!r}")
    if order != "shuffled":
        one = list(range(count))[:: -1 if order == "reversed" else 1]
        return [list(one) for _ in range(rounds)]
    rng = random.Random(seed)
    return [rng.sample(range(count), count) for _ in range(rounds)]


@dataclass(frozen=True)
class Comparison:
    """The result of `compare`: each contender's `Sample` (over all rounds), or its error, and the run's settings.

    ``schedule`` lists each round's visiting order by name; ``info`` is the `provenance` (device, versions) taken
    when the comparison ran. ``flops`` / ``nbytes`` (per call, when given) turn medians into TFLOP/s / GB/s.
    """

    samples: dict[str, Sample]
    failures: dict[str, str]
    baseline: str
    order: str
    seed: int
    rounds: int
    reps: int
    schedule: list[list[str]]
    flops: float | None = None
    nbytes: float | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def ratios(self) -> dict[str, float | None]:
        """Each measured contender's median time over the baseline's (below 1: faster than the baseline); None for
        all when the baseline failed or its median is 0."""
        base = self.samples.get(self.baseline)
        if base is None or base.median_ms <= 0:  # (a median of 0: the baseline ran below the clock's resolution)
            return dict.fromkeys(self.samples)
        return {name: s.median_ms / base.median_ms for name, s in self.samples.items()}

    def value(self, name: str, metric: str = "ms") -> float | None:
        """``name``'s median as ``metric`` (one of `METRICS`); None when it failed."""
        if metric not in METRICS:
            raise ArgumentError(f"bench: metric={metric!r} is not one of {', '.join(METRICS)}")
        needs = {"TFLOP/s": ("flops", self.flops), "GB/s": ("bytes", self.nbytes)}.get(metric)
        if needs is not None and needs[1] is None:
            raise ArgumentError(f"bench: {metric} needs the work per call; pass {needs[0]}= to compare")
        sample = self.samples.get(name)
        if sample is None:
            return None
        if metric == "TFLOP/s":
            return sample.tflops(float(self.flops or 0))
        return sample.gbps(float(self.nbytes or 0)) if metric == "GB/s" else sample.median_ms

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: settings, per-contender times and statistics (and rates), ratios, failures, info."""
        contenders: dict[str, Any] = {}
        for name, s in self.samples.items():
            entry: dict[str, Any] = {**s.summary(), "times_ms": list(s.times_ms), "ratio": self.ratios[name]}
            if self.flops is not None:
                entry["tflops"] = s.tflops(self.flops)
            if self.nbytes is not None:
                entry["gbps"] = s.gbps(self.nbytes)
            contenders[name] = entry
        keys = ("baseline", "order", "seed", "rounds", "reps", "schedule", "flops", "nbytes", "failures", "info")
        return {**{k: getattr(self, k) for k in keys}, "contenders": contenders}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Comparison:
        """The comparison `to_dict` described (the statistics are recomputed from the stored times).

        Raises
        ------
        ArgumentError
            For a field that is missing or of the wrong type or range (a time that is not a finite number >= 0, a
            count below 1, an unknown order, ...); nothing is made from a bad file.
        """
        where = "the comparison"
        data = mapping(data, where)
        samples: dict[str, Sample] = {}
        for name, c in mapping(entry(data, "contenders", where), f"{where}'s contenders").items():
            times = entry(mapping(c, f"contender {name!r}"), "times_ms", f"contender {name!r}")
            if not isinstance(times, list):
                raise ArgumentError(f"bench: contender {name!r}'s times_ms must be a list of times, got {times!r:.60}")
            samples[name] = Sample(tuple(number(t, f"a time of contender {name!r}") for t in times))
        order = entry(data, "order", where)
        if order not in ORDERS:
            raise ArgumentError(f"bench: the comparison's order must be one of {', '.join(ORDERS)}, got {order!r:.60}")
        schedule = entry(data, "schedule", where)
        if not isinstance(schedule, list):
            raise ArgumentError(f"bench: the comparison's schedule must be a list of rounds, got {schedule!r:.60}")
        work = {k: entry(data, k, where) for k in ("flops", "nbytes")}
        failures = mapping(entry(data, "failures", where), f"{where}'s failures")
        return cls(
            samples=samples,
            failures={name: text(why, f"the failure of {name!r}") for name, why in failures.items()},
            baseline=text(entry(data, "baseline", where), "the comparison's baseline"),
            order=order,
            seed=number(entry(data, "seed", where), "the comparison's seed", integer=True),
            rounds=number(entry(data, "rounds", where), "the comparison's rounds", integer=True, positive=True),
            reps=number(entry(data, "reps", where), "the comparison's reps", integer=True, positive=True),
            schedule=[strings(visit, "a round of the comparison's schedule") for visit in schedule],
            **{k: None if v is None else number(v, f"the comparison's {k}", positive=True) for k, v in work.items()},
            info=dict(mapping(entry(data, "info", where), f"{where}'s info")),
        )

    def to_json(self, path: str | Path) -> Path:
        """Write `to_dict` as JSON to ``path``; returns the path."""
        out = Path(path)
        out.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return out

    @classmethod
    def from_json(cls, path: str | Path) -> Comparison:
        """Read a comparison written by `to_json` (`ArgumentError` for a file that is not valid JSON or not one; see
        `from_dict`)."""
        return cls.from_dict(read_json(path, "comparison"))


def _check(contenders: Mapping[str, Callable[[], object]], baseline: str | None) -> str:
    if not isinstance(contenders, Mapping) or not contenders:
        raise ArgumentError("bench.compare: pass a non-empty dict of {name: callable}")
    for name, fn in contenders.items():
        if not isinstance(name, str) or not callable(fn):
            raise ArgumentError(
                f"bench.compare: contender {name!r} is a {type(fn).__name__}; each must be a callable taking no "
                "arguments under a str name (e.g. {'tile': lambda: tk.softmax(x)})"
            )
    chosen = next(iter(contenders)) if baseline is None else baseline
    if chosen not in contenders:
        raise ArgumentError(f"bench.compare: baseline {chosen!r} is not a contender; pick one of {list(contenders)}")
    return chosen


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def compare(
    contenders: Mapping[str, Callable[[], object]],
    *,
    rounds: int = 10,
    reps: int = 5,
    warmup: int = 3,
    order: str = "shuffled",
    seed: int = 0,
    baseline: str | None = None,
    flush_l2: bool = True,
    stream: object = None,
    flops: float | None = None,
    nbytes: float | None = None,
) -> Comparison:
    """Time ``contenders`` in interleaved rounds and compare their medians against ``baseline``'s.

    Parameters
    ----------
    contenders : mapping of str to callable
        ``{name: fn}``; each ``fn()`` does one unit of work (and waits for it, or queues it on ``stream``).
    rounds : int
        Rounds (>= 1); each visits every contender in the round's order (see `round_orders`).
    reps : int
        Timed calls of each contender per round (>= 1); every call is one time of its `Sample`.
    warmup : int
        Untimed calls of each contender before the first round (>= 0).
    order : str
        ``"shuffled"`` (default), ``"fixed"`` or ``"reversed"``.
    seed : int
        Seed of the shuffled orders.
    baseline : str, optional
        The contender the ratios divide by; the first one when omitted.
    flush_l2, stream
        As for `measure`.
    flops, nbytes : float, optional
        Work of one call, for TFLOP/s and GB/s.

    Returns
    -------
    Comparison

    Raises
    ------
    ArgumentError
        For an empty mapping, a non-callable contender, an unknown order or baseline, or a count out of range;
        checked before anything runs. A contender's own exception is recorded in ``failures``, not raised.
    """
    chosen = _check(contenders, baseline)
    work = {"flops": flops, "nbytes": nbytes}
    contenders = dict(contenders)  # what was checked is what runs, whatever a contender does to the caller's mapping
    check_count(warmup, "warmup", 0)
    check_count(reps, "reps", 1)
    # As from_dict reads them back: a NaN, infinite, negative or non-number work was taken, and to_json then wrote
    # a file its own from_json refused (or to_dict failed with a TypeError).
    flops, nbytes = (None if w is None else number(w, f"compare's {k}", positive=True) for k, w in work.items())
    names = list(contenders)
    visits = [[names[i] for i in visit] for visit in round_orders(len(names), rounds, order, seed)]
    times: dict[str, list[float]] = {name: [] for name in names}
    failures: dict[str, str] = {}
    timer = Timer(flush_l2=flush_l2, stream=stream)
    try:
        for name, fn in contenders.items():
            try:
                for _ in range(warmup):
                    fn()
            except Exception as exc:  # a contender's failure is its result; the others still run
                failures[name] = _error(exc)
        for visit in visits:
            for name in (n for n in visit if n not in failures):
                try:
                    times[name] += [timer.time_ms(contenders[name]) for _ in range(reps)]
                except Exception as exc:  # as above
                    failures[name] = _error(exc)
    finally:
        timer.close()
    samples = {name: Sample(tuple(t)) for name, t in times.items() if name not in failures}
    info = provenance(order=order, seed=seed, flush_l2=flush_l2)
    return Comparison(samples, failures, chosen, order, seed, rounds, reps, visits, flops, nbytes, info)
