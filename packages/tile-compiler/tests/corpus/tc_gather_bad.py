# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds.
"""Misuse of ``x.gather``: each kernel fails to compile at its own line (the line tagged with the kernel's name)."""

from __future__ import annotations

import tile.compiler.lang as tile
from tile.compiler.lang import Mut, Tensor, f32, i32


def float_index(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.gather(tile.arange(B).astype(tile.f32)))  # float_index


def bool_index(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.gather(tile.arange(B) > 2))  # bool_index


def too_few(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, (-1, -1)]):
    z.store(x.gather(tile.arange(B)))  # too_few


def too_many(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.gather(tile.arange(B), tile.arange(B)))  # too_many


def from_output(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(z.gather(tile.arange(B)))  # from_output


def float_padding_int(z: Mut[Tensor[i32, "B"]], x: Tensor[i32, -1]):
    z.store(x.gather(tile.arange(B), padding=0.5))  # float_padding_int


def bool_padding(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.gather(tile.arange(B), padding=True))  # bool_padding


def tile_padding_dtype(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.gather(tile.arange(B), padding=tile.zeros((B,), tile.f16)))  # tile_padding_dtype


def no_broadcast(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, (-1, -1)]):
    z.store(x.gather(tile.arange(B), tile.arange(2 * B)))  # no_broadcast


def bad_keyword(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.gather(tile.arange(B), latency=2))  # bad_keyword


def int_mask(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.gather(tile.arange(B), mask=tile.arange(B)))  # int_mask


def cutile_spelling(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.gather(x, tile.arange(B)))  # cutile_spelling
