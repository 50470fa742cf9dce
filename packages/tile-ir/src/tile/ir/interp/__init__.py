"""Reference interpreter for Tile IR on numpy (the ``interp`` extra: numpy and ml_dtypes).

Runs an entry kernel block by block over its grid with the semantics of every op the compiler emits, against
host numpy buffers, and reports what would make a device run undefined: inter-block data races
(`DataRaceError`), memory ops of one block that no token chain orders (`TokenOrderError`), broken ``assume`` and
``inbounds`` promises, out-of-bounds accesses::

    import numpy as np
    from tile.ir import interp

    x, y = np.ones(1024, np.float32), np.ones(1024, np.float32)
    z = np.zeros(1024, np.float32)
    interp.launch(module, grid=(8,), args=[x, 1024, 1, y, 1024, 1, z, 1024, 1])

`tile.ir` itself never imports this package (nor numpy); import it explicitly.
"""

from __future__ import annotations

try:
    import ml_dtypes as _ml_dtypes  # noqa: F401 - probe the extra's dependencies once, with a clear message
    import numpy as _numpy  # noqa: F401 - same probe
except ImportError as _missing:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"tile.ir.interp needs numpy and ml_dtypes ({_missing}); install them with: pip install 'tile-ir[interp]'"
    ) from _missing

from ._errors import (
    BlockId,
    DataRaceError,
    InterpError,
    KernelAssertionError,
    MemoryAccessError,
    TokenOrderError,
    UnsupportedOpError,
)
from ._launch import SUPPORTED_OPS, launch
from ._memory import Memory, Region

__all__ = [
    "SUPPORTED_OPS",
    "BlockId",
    "DataRaceError",
    "InterpError",
    "KernelAssertionError",
    "Memory",
    "MemoryAccessError",
    "Region",
    "TokenOrderError",
    "UnsupportedOpError",
    "launch",
]
