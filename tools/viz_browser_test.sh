#!/usr/bin/env bash
# End-to-end test of the VIZ explorer in a real browser: runs `examples/lazy_matmul` with VIZ=1,
# waits for its server, loads the page in headless Chromium (Debian's `chromium`, installed here
# when missing) and checks that the graph and code panes render, that stepping through a pass's
# rewrites changes the drawn graph, and saves a screenshot to $CARGO_TARGET_DIR (default
# target/) /viz-screenshot.png. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
start_time=$(date +%s)

if ! command -v chromium >/dev/null 2>&1; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  echo "viz test: installing chromium"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium >/dev/null
fi

target_dir=${CARGO_TARGET_DIR:-target}
screenshot="$target_dir/viz-screenshot.png"
cargo build --quiet --example lazy_matmul
mkdir -p "$target_dir"

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=${VIZ_TEST_PORT:-18765}
while port_in_use "$port"; do port=$((port + 1)); done

work=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

N=64 VIZ=1 VIZ_PORT=$port "$target_dir/debug/examples/lazy_matmul" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 120); do
  port_in_use "$port" && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; echo "viz test: the example exited" >&2; exit 1; }
  sleep 0.5
done
port_in_use "$port" || { cat "$work/server.log"; echo "viz test: no server on port $port" >&2; exit 1; }
url="http://127.0.0.1:$port/"

browser() {
  chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
    --user-data-dir="$work/profile" --window-size=1600,1000 --virtual-time-budget=8000 "$@" 2>/dev/null
}
fail() { echo "viz test FAILED: $*" >&2; exit 1; }

# the rendered page at step $1 of the default pass (the last kernel's first pass that rewrote)
browser --dump-dom "$url?s=0" >"$work/step0.html"
browser --dump-dom "$url?s=1" >"$work/step1.html"
for step in 0 1; do
  page="$work/step$step.html"
  grep -q 'data-ready="1"' "$page" || fail "step $step: the page did not finish rendering"
  [ "$(grep -o '<g class="node' "$page" | wc -l)" -gt 0 ] || fail "step $step: no graph nodes drawn"
  grep -q '<path class="edge"' "$page" || fail "step $step: no graph edges drawn"
  tr '\n' ' ' <"$page" | grep -Eq '<pre id="code">[^<]*void r_[0-9_]*\(' || fail "step $step: the code pane lacks the kernel's source"
done
node_ids() { grep -o '<g class="node[^"]*" data-id="[0-9]*"' "$1" | grep -o 'data-id="[0-9]*"' | sort; }
[ "$(node_ids "$work/step0.html")" != "$(node_ids "$work/step1.html")" ] || fail "stepping did not change the graph"
grep -q '<g class="node changed' "$work/step1.html" || fail "step 1 highlights no changed node"

browser --screenshot="$screenshot" "$url" >/dev/null
[ "$(wc -c <"$screenshot")" -gt 20000 ] || fail "the screenshot $screenshot looks empty"

echo "viz test: ok (graph $(node_ids "$work/step0.html" | wc -l) -> $(node_ids "$work/step1.html" | wc -l) nodes, \
screenshot $screenshot, $(($(date +%s) - start_time)) s)"
