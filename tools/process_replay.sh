#!/usr/bin/env bash
# Process replay (tinygrad's [pr]): show that a change leaves the generated code alone.
#
#   tools/process_replay.sh [BASE_REV]
#
# Runs a fixed workload (the lazy_matmul example, two beautiful_mnist steps at batch 32, and a set
# of tests) once at BASE_REV and once in the working tree, each with PROCESS_REPLAY=<dir> so that
# every kernel compiled for the CPU leaves its C source in <dir> as <name>-<key>.c (the key hashes
# the kernel's AST and codegen settings: src/codegen/replay.rs). Then it matches the two captures
# by key and prints either "process replay: no changes (N kernels)" (exit 0) or a unified diff
# per changed kernel and the changed/added/removed counts (exit 1). Exit 2: the workload or the
# capture failed.
#
# BASE_REV defaults to main; if main is HEAD, to HEAD when the working tree has changes and to
# HEAD~1 when it is clean. BASE_REV must have the PROCESS_REPLAY hook (src/codegen/replay.rs).
# The base revision is exported (git archive) to <target>/process-replay/tree and built in
# <target>/process-replay/target, kept between runs so that replaying against the same
# revision again builds nothing. <target> is $CARGO_TARGET_DIR, else ./target.
#
# MAX_DIFFS (default 10): how many kernel diffs to print; the captures are kept when they differ.
# beautiful_mnist needs Fashion-MNIST (tools/setup.sh --demo installs it).
set -euo pipefail

root=$(git rev-parse --show-toplevel)
cd "$root"

if [ $# -ge 1 ]; then
    base=$1
elif [ "$(git rev-parse main)" != "$(git rev-parse HEAD)" ]; then
    base=main
elif [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    base=HEAD
else
    base=HEAD~1
fi
base_commit=$(git rev-parse --verify "$base^{commit}")

target=${CARGO_TARGET_DIR:-$root/target}
replay_home=$target/process-replay
work=$(mktemp -d "${TMPDIR:-/tmp}/lazygrad-process-replay.XXXXXX")
max_diffs=${MAX_DIFFS:-10}

# the tests whose kernels are captured (those missing at a revision are skipped with a note)
tests=(ops opts schedule torch_ref api_math api_movement api_reduce)

# Export BASE_REV to $replay_home/tree, unless that revision is already there. A fresh export's
# files get the current time, so cargo rebuilds what changed even when going back in history.
export_base() {
    local tree=$replay_home/tree
    if [ "$(cat "$replay_home/rev" 2>/dev/null)" != "$base_commit" ]; then
        rm -rf "$tree"
        mkdir -p "$tree"
        git archive "$base_commit" | tar -x -m -C "$tree"
        echo "$base_commit" >"$replay_home/rev"
    fi
}

# run_workload SIDE LABEL TREE TARGET_DIR: build and run the workload in TREE, capturing into
# $work/SIDE (and logging to $work/SIDE.log).
run_workload() {
    local label=$2 tree=$3 target_dir=$4 capture=$work/$1 log=$work/$1.log
    local present=()
    for t in "${tests[@]}"; do
        if [ -f "$tree/tests/$t.rs" ]; then present+=(--test "$t"); else echo "  ($label has no tests/$t.rs)"; fi
    done
    echo "process replay: building and running the workload at $label (log: $log)"
    local start=$SECONDS
    (
        cd "$tree"
        export CARGO_TARGET_DIR=$target_dir PROCESS_REPLAY=$capture DEV=CPU
        cargo build --release --examples "${present[@]}"
        cargo run --release --example lazy_matmul
        BS=32 STEPS=2 FASHION=1 cargo run --release --example beautiful_mnist
        # one test at a time: random kernels embed a process-wide draw counter, so tests that draw
        # concurrently would make different kernels from run to run
        cargo test --release "${present[@]}" -- --test-threads=1
    ) >"$log" 2>&1 || {
        tail -n 20 "$log"
        echo "process replay: the workload failed at $label (full log: $log)"
        exit 2
    }
    if [ -z "$(ls -A "$capture" 2>/dev/null)" ]; then
        echo "process replay: nothing was captured at $label; does it have the PROCESS_REPLAY hook (src/codegen/replay.rs)?"
        exit 2
    fi
    echo "  done in $((SECONDS - start)) s, $(ls "$capture" | wc -l) kernels captured"
}

export_base
run_workload base "base $base (${base_commit:0:10})" "$replay_home/tree" "$replay_home/target"
run_workload new "the working tree" "$root" "$target"

# capture files by key: <name>-<key>.c -> key
declare -A base_files new_files
for f in "$work"/base/*; do k=${f##*-}; base_files[${k%.*}]=$f; done
for f in "$work"/new/*; do k=${f##*-}; new_files[${k%.*}]=$f; done

changed=0 added=() removed=()
for key in $(printf '%s\n' "${!base_files[@]}" "${!new_files[@]}" | sort -u); do
    old=${base_files[$key]:-} new=${new_files[$key]:-}
    if [ -z "$new" ]; then
        removed+=("$(basename "$old")")
    elif [ -z "$old" ]; then
        added+=("$(basename "$new")")
    elif ! cmp -s "$old" "$new"; then
        changed=$((changed + 1))
        if [ "$changed" -le "$max_diffs" ]; then
            diff -u --label "base/$(basename "$old")" --label "new/$(basename "$new")" "$old" "$new" || true
        fi
    fi
done

if [ "$changed" -eq 0 ] && [ ${#added[@]} -eq 0 ] && [ ${#removed[@]} -eq 0 ]; then
    echo "process replay: no changes (${#new_files[@]} kernels)"
    rm -rf "$work"
    exit 0
fi
[ "$changed" -gt "$max_diffs" ] && echo "... $((changed - max_diffs)) more changed kernels (MAX_DIFFS=$max_diffs)"
for f in "${removed[@]}"; do echo "removed: $f"; done
for f in "${added[@]}"; do echo "added:   $f"; done
echo "process replay: $changed changed, ${#added[@]} added, ${#removed[@]} removed" \
    "(base ${#base_files[@]} kernels, working tree ${#new_files[@]}); captures in $work"
exit 1
