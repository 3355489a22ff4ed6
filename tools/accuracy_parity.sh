#!/usr/bin/env bash
# beautiful_mnist's final test accuracy in lazygrad and in PyTorch (tools/mnist_torch.py: same
# model, initialization, Adam, batch sampling and evaluation) for seeds 1..SEEDS (default 10),
# on Fashion-MNIST unless FASHION=0: one line per seed, then the means and their difference.
# Each run's per-step losses stay in $OUT_DIR (default: a temporary folder, removed) as
# <framework>-<seed>.txt. Usage: tools/accuracy_parity.sh
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${SEEDS:-10}
fashion=${FASHION:-1}
out=${OUT_DIR:-$(mktemp -d)}
[ -n "${OUT_DIR:-}" ] || trap 'rm -rf "$out"' EXIT
mkdir -p "$out"
cargo build --release --quiet --example beautiful_mnist
accuracy() { awk '$1 == "test_accuracy_pct" {print $2}' "$1"; }
printf "%-6s %10s %10s\n" seed lazygrad pytorch
for s in $(seq 1 "$seeds"); do
  FASHION=$fashion SEED=$s ./target/release/examples/beautiful_mnist >"$out/lazygrad-$s.txt" 2>"$out/lazygrad-$s.log"
  FASHION=$fashion SEED=$s THREADS=2 python3 tools/mnist_torch.py >"$out/pytorch-$s.txt" 2>"$out/pytorch-$s.log"
  printf "%-6s %10s %10s\n" "$s" "$(accuracy "$out/lazygrad-$s.txt")" "$(accuracy "$out/pytorch-$s.txt")"
done | awk '{print} {a += $2; b += $3; n++} END {printf "%-6s %10.2f %10.2f\ndifference of the means: %+.2f pt\n", "mean", a / n, b / n, a / n - b / n}'
