"""Checking what a JSON file says before a `Comparison` or a `Sweep` is made of it.

A results file is input like any other: hand-edited, truncated, or written by another tool. Every field is checked
for its type and range (finite, non-negative times; positive, finite sizes and work; str names), so a bad file is an
`ArgumentError` naming the field, never a ``KeyError``/``TypeError`` from deep inside, a NaN that sorts anywhere, or a
value that breaks the plot later.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tile.frontend import ArgumentError

__all__ = ["entry", "mapping", "number", "read_json", "strings", "text"]


def _bad(where: str, what: str, value: object) -> ArgumentError:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return ArgumentError(
        f"bench: {where} must be {what}, got {shown}; load only files that to_json wrote (or fix that field)"
    )


def mapping(value: object, where: str) -> Mapping[str, Any]:
    """``value`` as a mapping with str keys."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _bad(where, "an object with string keys", value)
    return value


def entry(data: Mapping[str, Any], key: str, where: str) -> Any:
    """``data[key]``, or an `ArgumentError` saying that ``where`` lacks it."""
    if key not in data:
        raise ArgumentError(f"bench: {where} has no {key!r}; load only files that to_json wrote")
    return data[key]


def number(value: object, where: str, *, integer: bool = False, positive: bool = False) -> Any:
    """``value`` if it is a finite int (or float, unless ``integer``) > 0 when ``positive``; bools are refused."""
    wanted = "a finite " + ("integer" if integer else "number")
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise _bad(where, wanted, value)
    if not math.isfinite(value):
        raise _bad(where, wanted, value)
    if positive and not value > 0:
        raise _bad(where, "positive", value)
    return value


def strings(value: object, where: str) -> list[str]:
    """``value`` as a list of str."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(where, "a list of strings", value)
    return list(value)


def text(value: object, where: str) -> str:
    """``value`` if it is a str."""
    if not isinstance(value, str):
        raise _bad(where, "a string", value)
    return value


def read_json(path: str | Path, what: str) -> Any:
    """The JSON value in the file at ``path`` (``what`` names it in errors); ``OSError`` as ``open`` raises it."""
    text = Path(path).read_text(encoding="utf-8", errors="strict")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # (JSONDecodeError is a ValueError; deep nesting overflows)
        raise ArgumentError(f"bench: {path} is not a JSON {what} ({exc}); load only files that to_json wrote") from None
