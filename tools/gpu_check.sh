#!/usr/bin/env bash
# The GPU check in one call, for a machine with an NVIDIA GPU and no Rust toolchain.
#   tools/gpu_check.sh --build   (here, on a CPU machine) builds the test and example binaries
#                                into gpu_bin/ (git-ignored; copied over in one go), with the
#                                Fashion-MNIST files when this machine has them
#   tools/gpu_check.sh           (there) runs them and prints one table
# There it runs the suites on the CUDA device (NVRTC from the CUDA toolkit, the driver's
# libcuda), beautiful_mnist with DEV=CUDA, the benchmark rows on CUDA, the OpenCL device on the
# driver's OpenCL, and data_parallel built with `--features nccl` on CUDA (its all-reduce over
# ranks through NCCL, one rank: the job's own libmpi goes along in gpu_bin/lib) against the same
# program on the CPU. A missing OpenCL loader or ICD is found and pointed to where the driver
# has one.
set -uo pipefail
cd "$(dirname "$0")/.."

suites=(devices torch_ref ops schedule jit train tensor_cores)
if [ "${1:-}" = "--build" ]; then
  set -e
  rm -rf gpu_bin && mkdir -p gpu_bin
  for t in "${suites[@]}"; do
    exe=$(cargo test --release --no-run --message-format=json --test "$t" 2>/dev/null |
      python3 -c 'import json,sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable")][-1])')
    cp "$exe" "gpu_bin/$t"
  done
  cargo build --release --quiet --example bench --example beautiful_mnist
  cp target/release/examples/bench target/release/examples/beautiful_mnist gpu_bin/
  if [ -d /usr/share/datasets/fashion-mnist ]; then cp -r /usr/share/datasets/fashion-mnist gpu_bin/; fi
  # last: the feature rebuilds the library
  cargo build --release --quiet --features nccl --example data_parallel
  cp target/release/examples/data_parallel gpu_bin/data_parallel_nccl
  mkdir -p gpu_bin/lib
  ldd gpu_bin/data_parallel_nccl | awk '/=> \// {print $3}' | grep -E 'mpi|open-(rte|pal)|hwloc|event' | xargs -r cp -t gpu_bin/lib
  strip gpu_bin/* 2>/dev/null || true
  du -sh gpu_bin && ls -la gpu_bin
  exit 0
fi

[ -d gpu_bin ] || { echo "gpu_check: no gpu_bin/; run tools/gpu_check.sh --build first" >&2; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

# the OpenCL loader (the CUDA toolkit ships one) and NVIDIA's ICD
if ! ldconfig -p | grep -q 'libOpenCL.so.1'; then
  loader=$(find /usr/local/cuda*/ /usr/lib* -name 'libOpenCL.so.1' 2>/dev/null | head -1)
  [ -n "$loader" ] && export OPENCL_DYLIB_PATH="$loader"
fi
if [ ! -f /etc/OpenCL/vendors/nvidia.icd ]; then
  icd=$(ldconfig -p | awk '/libnvidia-opencl.so.1/ {print $NF; exit}')
  if [ -n "$icd" ]; then
    mkdir -p /tmp/lazygrad-icd && echo "$icd" > /tmp/lazygrad-icd/nvidia.icd
    export OCL_ICD_VENDORS=/tmp/lazygrad-icd
  fi
fi
echo "OpenCL loader: ${OPENCL_DYLIB_PATH:-system}; ICDs: ${OCL_ICD_VENDORS:-/etc/OpenCL/vendors}"

export LAZYGRAD_CACHE=/tmp/lazygrad-cache
# NVRTC from the CUDA toolkit when the loader does not know it
if ! ldconfig -p | grep -q 'libnvrtc.so'; then
  nvrtc=$(find /usr/local/cuda*/ -name 'libnvrtc.so*' 2>/dev/null | head -1)
  [ -n "$nvrtc" ] && export LD_LIBRARY_PATH="$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
rows=()
run() {
  local name=$1; shift
  local start=$SECONDS
  local log="/tmp/gpu_check_${name// /_}.log"
  if timeout 300 "$@" > "$log" 2>&1; then result=pass; else result="FAIL (exit $?)"; fi
  rows+=("| $name | $result | $((SECONDS - start)) s |")
  tail -5 "$log"
}
for t in "${suites[@]}"; do run "CUDA $t" env DEV=CUDA "gpu_bin/$t"; done
[ -d gpu_bin/fashion-mnist ] && export FASHION_MNIST_DIR=gpu_bin/fashion-mnist
run "CUDA beautiful_mnist" env DEV=CUDA FASHION=1 gpu_bin/beautiful_mnist
run "CL devices" env DEV=CL DEBUG=1 gpu_bin/devices --test-threads=1
losses() { grep '^step ' "$1" | awk '{print $4}' | tr '\n' ' '; }
run "CPU data_parallel" env DEV=CPU LD_LIBRARY_PATH=gpu_bin/lib gpu_bin/data_parallel_nccl
run "CUDA data_parallel (NCCL)" env DEV=CUDA LD_LIBRARY_PATH=gpu_bin/lib gpu_bin/data_parallel_nccl
python3 - "$(losses /tmp/gpu_check_CPU_data_parallel.log)" "$(losses '/tmp/gpu_check_CUDA_data_parallel_(NCCL).log')" <<'PY' &&
import sys
cpu, cuda = ([float(v) for v in s.split()] for s in sys.argv[1:3])
assert len(cpu) == len(cuda) == 10 and all(abs(a - b) <= 1e-4 * max(1, abs(a)) for a, b in zip(cpu, cuda)), (cpu, cuda)
PY
  rows+=("| NCCL losses equal the CPU's | pass | |") || rows+=("| NCCL losses equal the CPU's | FAIL | |")
for dev in CUDA CL; do
  rows_for=$([ "$dev" = CUDA ] && echo "matmul gpu_" || echo matmul)
  DEV=$dev timeout 240 gpu_bin/bench $rows_for > "/tmp/gpu_check_bench_$dev.log" 2>&1
  grep '^bench' "/tmp/gpu_check_bench_$dev.log" | while read -r _ name value unit; do echo "| $dev $name | $value $unit | |"; done
done
grep -E '^(step_s|wall_s|test_accuracy_pct) ' /tmp/gpu_check_CUDA_beautiful_mnist.log 2>/dev/null | while read -r k v; do echo "| CUDA beautiful_mnist $k | $v | |"; done

echo
echo "| check | result | time |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
# the logs come back with the device tool's $OUT
if [ -n "${OUT:-}" ]; then cp /tmp/gpu_check_*.log "$OUT"/ 2>/dev/null || true; fi
