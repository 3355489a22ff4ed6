#!/usr/bin/env bash
# beautiful_mnist's final test accuracy in lazygrad and in PyTorch (tools/mnist_torch.py: same
# model, initialization, Adam, batch sampling and evaluation) for seeds 1..SEEDS (default 10),
# on Fashion-MNIST unless FASHION=0: one line per seed, then the means and their difference,
# then the training loss averaged over the seeds at every tenth step. Each run's output and log
# (its per-step losses) stay in $OUT_DIR (default: a temporary folder, removed) as
# <framework>-<seed>.txt and .log. PAIRED=1: each seed's PyTorch run writes its initial weights
# and batches (SAVE_INIT) and lazygrad trains from them (INIT), so the two differ only in their
# arithmetic, not in their random draws. Usage: [PAIRED=1] tools/accuracy_parity.sh
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
  if [ "${PAIRED:-0}" = 1 ]; then
    FASHION=$fashion SEED=$s THREADS=2 SAVE_INIT="$out/init-$s.safetensors" python3 tools/mnist_torch.py >"$out/pytorch-$s.txt" 2>"$out/pytorch-$s.log"
    FASHION=$fashion INIT="$out/init-$s.safetensors" ./target/release/examples/beautiful_mnist >"$out/lazygrad-$s.txt" 2>"$out/lazygrad-$s.log"
  else
    FASHION=$fashion SEED=$s ./target/release/examples/beautiful_mnist >"$out/lazygrad-$s.txt" 2>"$out/lazygrad-$s.log"
    FASHION=$fashion SEED=$s THREADS=2 python3 tools/mnist_torch.py >"$out/pytorch-$s.txt" 2>"$out/pytorch-$s.log"
  fi
  printf "%-6s %10s %10s\n" "$s" "$(accuracy "$out/lazygrad-$s.txt")" "$(accuracy "$out/pytorch-$s.txt")"
done | awk '{print} {a += $2; b += $3; n++} END {printf "%-6s %10.2f %10.2f\ndifference of the means: %+.2f pt\n", "mean", a / n, b / n, a / n - b / n}'
# the per-step losses: "step    7/70 loss  0.583" records, separated by carriage returns
losses() { tr '\r' '\n' <"$1" | awk '$1 == "step" && $3 == "loss" {split($2, s, "/"); print s[1], $4}'; }
echo
printf "%-6s %10s %10s\n" step lazygrad pytorch
for f in lazygrad pytorch; do
  for s in $(seq 1 "$seeds"); do losses "$out/$f-$s.log"; done | awk -v f="$f" '{sum[$1] += $2; n[$1]++} END {for (k in sum) print f, k, sum[k] / n[k]}'
done | awk '{loss[$1, $2] = $3; steps[$2] = 1} END {for (k in steps) if (k % 10 == 0 || k == 1) printf "%-6s %10.3f %10.3f\n", k, loss["lazygrad", k], loss["pytorch", k]}' | sort -n
