#!/usr/bin/env bash
# Runs on the lent GPU machine (see ../shared/device/README.md), from the project root, with
# .device-kit carried: the gpu-marked tests (skips are failures) and the benchmarks, logs under $OUT.
#   bash scripts/gpu-check.sh [tests|bench|all] [pytest args...]
set -uo pipefail
cd "$(dirname "$0")/.."
. .device-kit/setup.sh
export PYTHONPATH=$(ls -d packages/*/src | paste -sd:)${PYTHONPATH:+:$PYTHONPATH}
export TILE_REQUIRE_GPU=1 TILE_CACHE_DIR=${TILE_CACHE_DIR:-/tmp/tile-cache}
out=${OUT:-/tmp/tile-gpu-out}
mkdir -p "$out" benchmarks/results
what=${1:-all}; shift || true
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/device.txt"
if [ "$what" = tests ] || [ "$what" = all ]; then
  python3 -m pytest -m gpu -p no:cacheprovider -q -rs "$@" packages tests 2>&1 | tee "$out/gpu-tests.log"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  for b in benchmarks/bench_*.py; do
    echo "==> $b"
    timeout 240 python3 "$b" 2>&1 | tee "$out/$(basename "$b" .py).log"
  done
  cp -r benchmarks/results "$out/" 2>/dev/null
fi
