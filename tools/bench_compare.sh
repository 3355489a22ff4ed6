#!/usr/bin/env bash
# The benchmark in one command: lazygrad (examples/bench.rs) beside numpy, PyTorch and tinygrad,
# measured in one run on 2 threads, printed as one markdown table with the done-when ratios.
# Installs what it needs first (clang-14 for tinygrad's CPU device; the Python venv on first use).
# Usage: tools/bench_compare.sh [--beam]   (docs/bench.md says what is measured)
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --bench
tools/setup.sh --models
exec python3 tools/bench_compare.py "$@"
