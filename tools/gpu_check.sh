#!/usr/bin/env bash
# The GPU check in one call, for a machine with an NVIDIA GPU and no Rust toolchain.
#   tools/gpu_check.sh --build   (here, on a CPU machine) builds the test and example binaries
#                                into gpu_bin/ (git-ignored; a few MB, copied over in one go)
#   tools/gpu_check.sh           (there) runs them and prints one table
# Today it runs the OpenCL device (the only GPU path so far) on the driver's OpenCL: the device
# tests, the torch_ref suite against INTERP, and the matmul benchmark rows. A missing OpenCL
# loader or ICD is found and pointed to where the driver has one.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--build" ]; then
  set -e
  rm -rf gpu_bin && mkdir -p gpu_bin
  for t in devices torch_ref; do
    exe=$(cargo test --release --no-run --message-format=json --test "$t" 2>/dev/null |
      python3 -c 'import json,sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable")][-1])')
    cp "$exe" "gpu_bin/$t"
  done
  cargo build --release --quiet --example bench
  cp target/release/examples/bench gpu_bin/bench
  ls -la gpu_bin
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
rows=()
run() {
  local name=$1; shift
  local start=$SECONDS
  if timeout 300 "$@" > "/tmp/gpu_check_$name.log" 2>&1; then result=pass; else result="FAIL (exit $?)"; fi
  rows+=("| $name | $result | $((SECONDS - start)) s |")
  tail -5 "/tmp/gpu_check_$name.log"
}
run devices env DEV=CL DEBUG=1 gpu_bin/devices --test-threads=1
run torch_ref env DEV=CL gpu_bin/torch_ref
DEV=CL gpu_bin/bench matmul > /tmp/gpu_check_bench.log 2>&1
grep '^bench' /tmp/gpu_check_bench.log | while read -r _ name value unit; do echo "| CL $name | $value $unit | |"; done

echo
echo "| check | result | time |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
# the logs come back with the device tool's $OUT
if [ -n "${OUT:-}" ]; then cp /tmp/gpu_check_*.log "$OUT"/ 2>/dev/null || true; fi
