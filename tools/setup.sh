#!/usr/bin/env bash
# Installs what lazygrad needs on a fresh Debian machine, idempotently: a C compiler for the CPU
# device (gcc; clang is used instead when present) and, with `--demo`, the Fashion-MNIST data
# set (Debian's dataset-fashion-mnist, so the demo trains offline) and curl for downloads; with
# `--bench`, clang-14 for tinygrad's CPU device in tools/bench_compare.py (only the versioned
# `clang-14` command, so lazygrad's own compiler choice, `clang` else gcc, stays as it was).
# Cargo and rustc must already be installed.
set -euo pipefail

need=()
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || command -v clang >/dev/null 2>&1 || need+=(gcc libc6-dev)
if [ "${1:-}" = "--demo" ]; then
  [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || need+=(dataset-fashion-mnist)
  command -v curl >/dev/null 2>&1 || need+=(curl)
fi
if [ "${1:-}" = "--bench" ]; then
  command -v clang-14 >/dev/null 2>&1 || need+=(clang-14)
  python3 -c "import venv, ensurepip" 2>/dev/null || need+=(python3-venv)
fi

if [ ${#need[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  echo "setup: installing ${need[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}"
fi

command -v cargo >/dev/null 2>&1 || { echo "setup: cargo not found; install Rust (rustup) first" >&2; exit 1; }
