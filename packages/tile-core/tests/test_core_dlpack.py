"""The DLPack exporter, exercised with host memory (kDLCPU) so numpy can consume it without a GPU."""

from __future__ import annotations

import gc
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tile.core as tc
from tile.core._dlpack import KDL_CPU, dlpack_dtype, export_capsule, live_exports, wants_versioned


class HostExporter:
    """Exports a window of a numpy array the way DeviceView exports device memory."""

    def __init__(
        self, array: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...], readonly: bool = False
    ) -> None:
        self.array, self.shape, self.strides, self.readonly = array, shape, strides, readonly

    def __dlpack__(self, *, stream: None = None, max_version: tuple[int, int] | None = None, **kwargs: Any) -> Any:
        return export_capsule(
            self.array.ctypes.data,
            self.array.dtype,
            self.shape,
            self.strides,
            device=(KDL_CPU, 0),
            owner=self,
            readonly=self.readonly,
            versioned=wants_versioned(max_version),
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        return (KDL_CPU, 0)


def test_consumer_sees_the_same_memory_with_strides() -> None:
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    exporter = HostExporter(base, (3, 2), (16, 8))
    view = np.from_dlpack(exporter)
    np.testing.assert_array_equal(view, base[:, ::2])
    base[1, 2] = -1.0
    assert view[1, 1] == -1.0


def test_owner_lives_until_the_consumer_lets_go() -> None:
    exporter = HostExporter(np.zeros(4, np.int32), (4,), (4,))
    view = np.from_dlpack(exporter)
    assert live_exports(exporter) == 1
    del view
    gc.collect()
    assert live_exports(exporter) == 0


def test_unconsumed_capsule_releases_its_export() -> None:
    exporter = HostExporter(np.zeros(4, np.int32), (4,), (4,))
    capsule = exporter.__dlpack__()
    assert live_exports(exporter) == 1
    del capsule
    gc.collect()
    assert live_exports(exporter) == 0


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (np.int8, (0, 8)),
        (np.uint16, (1, 16)),
        (np.float16, (2, 16)),
        (np.float64, (2, 64)),
        (np.complex64, (5, 64)),
        (np.bool_, (6, 8)),
        (ml_dtypes.bfloat16, (4, 16)),
    ],
)
def test_dtype_codes(dtype: Any, expected: tuple[int, int]) -> None:
    assert dlpack_dtype(np.dtype(dtype)) == expected


def test_non_element_strides_are_refused() -> None:
    with pytest.raises(tc.LayoutMismatchError, match="not whole elements"):
        export_capsule(0x1000, np.dtype(np.float32), (2,), (6,), device=(KDL_CPU, 0), owner=object())


def test_read_only_memory_is_exported_read_only() -> None:
    """A read-only export reaches a DLPack 1.0 consumer (numpy asks for one) as a read-only array."""
    base = np.arange(4, dtype=np.float32)
    view = np.from_dlpack(HostExporter(base, (4,), (4,), readonly=True))
    assert not view.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 9.0
    assert base[0] == 0.0
    writable = np.from_dlpack(HostExporter(base, (4,), (4,)))  # versioned too, without the flag
    writable[0] = 9.0
    assert base[0] == 9.0


def test_read_only_memory_is_never_exported_in_a_legacy_capsule() -> None:
    """A legacy capsule cannot say "read-only": the export is refused instead of handing out writable memory."""
    exporter = HostExporter(np.zeros(4, np.float32), (4,), (4,), readonly=True)
    with pytest.raises(BufferError, match="read-only"):
        exporter.__dlpack__()
    assert live_exports(exporter) == 0
    assert exporter.__dlpack__(max_version=(1, 0)) is not None
