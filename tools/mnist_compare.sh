#!/usr/bin/env bash
# beautiful_mnist in lazygrad and in PyTorch (CPU), one after the other on this machine, and a
# table of the figures with their ratio (lazygrad / PyTorch). Settings pass through to both:
# BS (512), STEPS (70), FASHION, SGD, MUON, LR, SEED. Usage: tools/mnist_compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cargo build --release --quiet --example beautiful_mnist
echo "lazygrad: training..." >&2
./target/release/examples/beautiful_mnist >"$out/lazygrad.txt"
echo "PyTorch: training..." >&2
python3 tools/mnist_torch.py >"$out/torch.txt"
printf "%-20s %12s %12s %8s\n" figure lazygrad pytorch ratio
for key in steps wall_s train_s step_s test_accuracy_pct kernels_per_step peak_rss_mb; do
    ours=$(awk -v k="$key" '$1 == k {print $2}' "$out/lazygrad.txt")
    theirs=$(awk -v k="$key" '$1 == k {print $2}' "$out/torch.txt")
    ratio=$(awk -v a="${ours:-0}" -v b="${theirs:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
    printf "%-20s %12s %12s %8s\n" "$key" "${ours:--}" "${theirs:--}" "$ratio"
done
