#!/usr/bin/env bash
# The GPU checks: the gpu-marked tests (skips are failures), the benchmarks, and compute-sanitizer over the examples.
#   bash scripts/gpu-check.sh [tests|bench|sanitize|all] [pytest args...]
# Needs an NVIDIA GPU with its driver (nvidia-smi), and either .device-kit/setup.sh (a prepared environment carried
# to a lent machine) or the packages installed with the toolchain, for example by `bash scripts/dev.sh test` on the
# GPU machine (then run this script with .venv/bin on PATH); `sanitize` also needs compute-sanitizer (CUDA toolkit),
# `bench` the peers (`pip install --group pyproject.toml:peer` and torch). Logs and results go under $OUT
# (default /tmp/tile-gpu-out; results also packed into $OUT/results.tgz). Exits non-zero when any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
fail() { echo "gpu-check: $*" >&2; exit 2; }
if [ -f .device-kit/setup.sh ]; then
  # shellcheck source=/dev/null
  . .device-kit/setup.sh || fail ".device-kit/setup.sh failed"
fi
command -v nvidia-smi > /dev/null || fail "nvidia-smi not found: this script needs an NVIDIA GPU and its driver"
python3 -c "import tile.frontend" 2> /dev/null || [ -f .device-kit/setup.sh ] \
  || fail "tile.frontend is not importable: run 'bash scripts/dev.sh test' here and put .venv/bin on PATH"
export PYTHONPATH=$(ls -d packages/*/src | paste -sd:)${PYTHONPATH:+:$PYTHONPATH}
export TILE_REQUIRE_GPU=1 TILE_CACHE_DIR=${TILE_CACHE_DIR:-/tmp/tile-cache}
out=${OUT:-/tmp/tile-gpu-out}
mkdir -p "$out" benchmarks/results
what=${1:-all}; shift || true
case "$what" in tests|bench|sanitize|all) ;; *) fail "usage: bash scripts/gpu-check.sh [tests|bench|sanitize|all] [pytest args...]" ;; esac
failed=()
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/device.txt" || failed+=("nvidia-smi")
if [ "$what" = tests ] || [ "$what" = all ]; then
  python3 -m pytest -m gpu -p no:cacheprovider -q -rs "$@" packages tests 2>&1 | tee "$out/gpu-tests.log" \
    || failed+=("gpu tests")
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  # The CPU-only benchmarks (bench_interp, bench_ir) belong to the development machine.
  for b in benchmarks/bench_launch.py benchmarks/bench_launch_floor.py benchmarks/bench_aio.py benchmarks/bench_frontend.py \
    benchmarks/bench_compile.py; do
    echo "==> $b"
    timeout 240 python3 "$b" 2>&1 | tee "$out/$(basename "$b" .py).log" || failed+=("$b")
  done
fi
if [ "$what" = sanitize ] || [ "$what" = all ]; then
  command -v compute-sanitizer > /dev/null || fail "compute-sanitizer not found: install the CUDA toolkit, or skip 'sanitize'"
  # memcheck: memory errors only. cuda.core counts a kernel's parameters by calling cuKernelGetParamInfo until it
  # answers CUDA_ERROR_INVALID_VALUE; that expected API error is not a memory error, so API errors are not reported.
  for e in examples/*.py; do
    for tool in memcheck racecheck; do
      extra=(); [ "$tool" = memcheck ] && extra=(--report-api-errors no)
      timeout 120 compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 9 python3 "$e" > "$out/san.log" 2>&1
      rc=$?
      echo "$e $tool rc=$rc :: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san.log" | tail -1) :: $(grep -vE '^=========' "$out/san.log" | tail -1)"
    done
  done 2>&1 | tee "$out/sanitizer.log"
  # The loop ran in a pipeline's subshell: its failures are read back from the log.
  grep -qE ' rc=[1-9]' "$out/sanitizer.log" && failed+=("compute-sanitizer (see $out/sanitizer.log)")
  rm -f "$out/san.log"
fi
tar -czf "$out/results.tgz" benchmarks/results 2>/dev/null || failed+=("packing results")
if [ "${#failed[@]}" -ne 0 ]; then
  printf 'gpu-check: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "gpu-check: all $what checks passed"
