#!/usr/bin/env bash
# Installs what lazygrad needs on a fresh Debian machine, idempotently: a C compiler for the CPU
# device (gcc; clang is used instead when present) and, with `--demo`, the Fashion-MNIST data
# set (Debian's dataset-fashion-mnist, so the demo trains offline) and curl for downloads.
# Cargo and rustc must already be installed.
set -euo pipefail

need=()
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || command -v clang >/dev/null 2>&1 || need+=(gcc libc6-dev)
if [ "${1:-}" = "--demo" ]; then
  [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || need+=(dataset-fashion-mnist)
  command -v curl >/dev/null 2>&1 || need+=(curl)
fi

if [ ${#need[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  echo "setup: installing ${need[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}"
fi

command -v cargo >/dev/null 2>&1 || { echo "setup: cargo not found; install Rust (rustup) first" >&2; exit 1; }
