"""Hatchling build hook: compile tile.core's checked-launch fast path (``_fastcore.c``) as a stable-ABI extension.

The module is optional: tile.core's pure-Python launch behaves the same and runs wherever the module is missing, and
``TILE_PURE_PYTHON=1`` selects it (see ``tile.core._compiled``). Its one source compiles with every symbol hidden but
its init function.

The wheel is then a platform wheel tagged ``cp310-abi3-<platform>`` (one build loads on CPython 3.10+). An editable
install (``pip install -e``, used by ``scripts/dev.sh``) builds the module in place, beside its source, where the
editable path finds it. The system C compiler is used as sysconfig names it (``CC`` overrides), with the running
interpreter's headers. Without a compiler the build warns and makes a pure-Python wheel (tile.core then runs its
pure-Python launch path); ``TILE_REQUIRE_EXTENSION=1`` (CI) makes that an error instead. A free-threaded interpreter
has no stable ABI, so there the wheel is pure Python too.

Run as a script (``python packages/tile-core/hatch_build.py``) it builds the module in place, for a checkout used
through ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
FOLDER = ROOT / "src" / "tile" / "core"
SOURCES = (FOLDER / "_fastcore.c",)
MODULE = "_fastcore.abi3.so"
IN_PLACE = FOLDER / MODULE

try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script: only `compile_extension` is used
    BuildHookInterface = object


def compile_extension(out: Path) -> Path:
    """Compile the ``SOURCES`` into ``out`` (raises ``OSError`` / ``CalledProcessError`` without a compiler)."""
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    include = sysconfig.get_paths()["include"]
    out.parent.mkdir(parents=True, exist_ok=True)
    flags = ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-fvisibility=hidden", f"-I{include}"]
    command = [*cc, *flags, *map(str, SOURCES), "-o", str(out)]
    subprocess.run(command, check=True)
    return out


def wheel_tag() -> str:
    """The wheel tag of a stable-ABI build for this platform."""
    return "cp310-abi3-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")


class FastCoreBuildHook(BuildHookInterface):  # type: ignore[misc, valid-type]
    """Builds the extension into the wheel (standard) or in place (editable)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        if sysconfig.get_config_var("Py_GIL_DISABLED"):
            # The stable ABI does not exist on free-threaded CPython (3.13t, 3.14t): launches take the pure path.
            self.app.display_info("tile-core: free-threaded Python has no abi3: the pure-Python launch path runs")
            return
        out = IN_PLACE if version == "editable" else Path(self.directory) / "fastcore-build" / MODULE
        try:
            compile_extension(out)
        except (OSError, subprocess.CalledProcessError) as error:
            if os.environ.get("TILE_REQUIRE_EXTENSION") == "1":
                raise RuntimeError(f"building tile.core's compiled launch path failed: {error}") from error
            self.app.display_warning(
                f"tile-core: no C compiler could build the compiled launch path ({error}); the wheel is pure "
                "Python and launches take the pure-Python path"
            )
            return
        build_data["pure_python"] = False
        build_data["tag"] = wheel_tag()
        if version != "editable":
            build_data["force_include"][str(out)] = f"tile/core/{MODULE}"


if __name__ == "__main__":
    print(compile_extension(IN_PLACE), file=sys.stderr)
