#!/usr/bin/env bash
# The README's two commands for a fresh Linux machine (only python3 and a package index needed):
#   bash scripts/dev.sh demo   set up .venv and run the main demo (GPU if present, else the CPU interpreter)
#   bash scripts/dev.sh test   set up .venv and run the full CPU test suite (tiers 1-2 of docs/development.md), on
#                              tile.core's and tile.frontend's compiled launch paths (built by the editable installs; TILE_PURE_PYTHON=1
#                              runs the pure one)
# Extra arguments after `test` go to pytest, after `demo` to the demo. PYTHON picks the interpreter (default python3, >= 3.10).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
venv=.venv
packages=(errors bindings core async ir compiler frontend kernels)

setup() {
  if [ ! -x "$venv/bin/python" ]; then
    echo "==> creating $venv with $($python --version)"
    "$python" -m venv "$venv"
  fi
  # PEP 735 dependency groups (pip install --group) need pip >= 25.1.
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -U "pip>=25.1"
  local args=() extra=${1:-}
  for p in "${packages[@]}"; do
    case "$p" in
      ir) args+=(-e "packages/tile-ir[interp]") ;;
      frontend) args+=(-e "packages/tile-frontend$extra") ;;
      *) args+=(-e "packages/tile-$p") ;;
    esac
  done
  echo "==> installing the Tile packages (editable${extra:+, with $extra})"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${args[@]}"
}

# The GPU toolchain (nvidia-cuda-tileiras, ~540 MB) is the `gpu` extra: the demo pulls it only where a GPU is.
gpu_extra() {
  if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then echo "[gpu]"; fi
}

# pytest-xdist spreads the suite over the cores; on two or fewer its start-up costs more than it saves.
parallel_args() {
  local cores
  cores=$(nproc 2> /dev/null || echo 1)
  if [ "$cores" -gt 2 ]; then echo "-n auto"; fi
}

case "${1:-}" in
  demo)
    shift
    setup "$(gpu_extra)"
    exec "$venv/bin/python" -m tile.frontend.demo "$@"
    ;;
  test)
    shift
    # tile-core's and tile-frontend's build hooks must compile their launch fast paths (a C compiler is required here).
    export TILE_REQUIRE_EXTENSION=${TILE_REQUIRE_EXTENSION:-1}
    setup
    # The test groups bring tileiras (tier 2 runs it for real) and, in the root group, pytest-xdist and hatchling.
    groups=(--group pyproject.toml:test)
    for p in "${packages[@]}"; do groups+=(--group "packages/tile-$p/pyproject.toml:test"); done
    echo "==> installing test dependencies"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "${groups[@]}"
    # Tier 2 (tileiras, installed above) must really run here, not skip.
    export TILE_REQUIRE_TILEIRAS=${TILE_REQUIRE_TILEIRAS:-1}
    # So must the tests reading cuTile Python's exports (cuda-tile, installed above).
    export TILE_REQUIRE_CUTILE=${TILE_REQUIRE_CUTILE:-1}
    status=0
    # shellcheck disable=SC2046  # parallel_args prints zero or two words
    "$venv/bin/python" -m pytest -q -p no:cacheprovider $(parallel_args) "$@" || status=$?
    if [ "$status" -eq 5 ]; then
      echo "error: pytest collected no tests" >&2
      exit 1
    fi
    exit "$status"
    ;;
  *)
    echo "usage: bash scripts/dev.sh demo|test [pytest args]" >&2
    exit 2
    ;;
esac
