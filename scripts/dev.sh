#!/usr/bin/env bash
# The README's two commands for a fresh Linux machine (only python3 and a package index needed):
#   bash scripts/dev.sh demo   set up .venv and run the main demo (GPU if present, else the CPU interpreter)
#   bash scripts/dev.sh test   set up .venv and run the full CPU test suite (tiers 1-2 of DESIGN §5)
# Extra arguments after `test` go to pytest. PYTHON picks the interpreter (default python3, >= 3.10).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
venv=.venv
packages=(bindings core async ir compiler frontend)

setup() {
  if [ ! -x "$venv/bin/python" ]; then
    echo "==> creating $venv with $($python --version)"
    "$python" -m venv "$venv"
  fi
  # PEP 735 dependency groups (pip install --group) need pip >= 25.1.
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -U "pip>=25.1"
  local args=()
  for p in "${packages[@]}"; do
    if [ "$p" = ir ]; then args+=(-e "packages/tile-ir[interp]"); else args+=(-e "packages/tile-$p"); fi
  done
  echo "==> installing the six Tile packages (editable)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${args[@]}"
}

case "${1:-}" in
  demo)
    setup
    exec "$venv/bin/python" -m tile.frontend.demo
    ;;
  test)
    shift
    setup
    groups=(--group pyproject.toml:test)
    for p in "${packages[@]}"; do groups+=(--group "packages/tile-$p/pyproject.toml:test"); done
    echo "==> installing test dependencies"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "${groups[@]}"
    # Tier 2 (tileiras, installed above) must really run here, not skip.
    export TILE_REQUIRE_TILEIRAS=${TILE_REQUIRE_TILEIRAS:-1}
    # So must the tests reading cuTile Python's exports (cuda-tile, installed above).
    export TILE_REQUIRE_CUTILE=${TILE_REQUIRE_CUTILE:-1}
    status=0
    "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" || status=$?
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
