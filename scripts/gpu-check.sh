#!/usr/bin/env bash
# Runs on the lent GPU machine (see ../shared/device/README.md), from the project root, with
# .device-kit carried: the gpu-marked tests (skips are failures), the benchmarks and compute-sanitizer
# over the examples; logs and results under $OUT (results also packed into $OUT/results.tgz).
#   bash scripts/gpu-check.sh [tests|bench|sanitize|all] [pytest args...]
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
  # The CPU-only benchmarks (bench_interp, bench_ir) belong to the development machine.
  for b in benchmarks/bench_launch.py benchmarks/bench_launch_floor.py benchmarks/bench_aio.py benchmarks/bench_frontend.py \
    benchmarks/bench_compile.py; do
    echo "==> $b"
    timeout 240 python3 "$b" 2>&1 | tee "$out/$(basename "$b" .py).log"
  done
fi
if [ "$what" = sanitize ] || [ "$what" = all ]; then
  # memcheck: memory errors only. cuda.core counts a kernel's parameters by calling cuKernelGetParamInfo until it
  # answers CUDA_ERROR_INVALID_VALUE; that expected API error is not a memory error, so API errors are not reported.
  for e in examples/*.py; do
    for tool in memcheck racecheck; do
      extra=(); [ "$tool" = memcheck ] && extra=(--report-api-errors no)
      timeout 120 compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 9 python3 "$e" > "$out/san.log" 2>&1
      echo "$e $tool rc=$? :: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san.log" | tail -1) :: $(grep -vE '^=========' "$out/san.log" | tail -1)"
    done
  done 2>&1 | tee "$out/sanitizer.log"
  rm -f "$out/san.log"
fi
tar -czf "$out/results.tgz" benchmarks/results 2>/dev/null
