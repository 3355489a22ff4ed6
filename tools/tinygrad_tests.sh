#!/usr/bin/env bash
# tinygrad's own tests against lazygrad: tools/tinygrad_tests.sh CHECKOUT [TEST_FILE ...]
#
# CHECKOUT is a clone of tinygrad's repository (its test files are taken at the pinned commit
# below, unmodified) or an unpacked source archive (its files as they are). The files run with
# pytest and a per-test timeout (TIMEOUT seconds, default 300) on DEV (default CPU), with
# tools/tinygrad_names first on the path: a `tinygrad` package that only maps tinygrad's names
# onto lazygrad's objects. The tests in tools/tinygrad_tests_leftout.txt are left out (device-
# specific ones, tinygrad internals), each with its reason. The summary (passed, failed by reason,
# left out) is printed and written to OUT (default <scratch>/summary.md); percentages count every
# collected test (RUN_SLOW=1 by default, so the tests tinygrad marks slow run too). The default files are test/backend/test_ops.py, test_tensor.py and test_nn.py.
# Exits 0 when the tests ran, whatever they gave, unless REQUIRE_ALL=1 (then only if all passed).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
PIN=a9069c177a9da9cca18593edf55acd2e6073cca6
checkout=${1:?usage: tools/tinygrad_tests.sh CHECKOUT [TEST_FILE ...]}
shift
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(test/backend/test_ops.py test/backend/test_tensor.py test/backend/test_nn.py)

scratch=${SCRATCH:-${TMPDIR:-/tmp}/lazygrad-tinygrad-tests}
rm -rf "$scratch/src" && mkdir -p "$scratch/src"
if git -C "$checkout" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$checkout" cat-file -e "$PIN^{commit}" 2>/dev/null ||
    { echo "tinygrad_tests: $checkout lacks commit $PIN" >&2; exit 1; }
  git -C "$checkout" archive "$PIN" test extra | tar -x -C "$scratch/src"
else
  cp -r "$checkout/test" "$scratch/src/"
  [ -d "$checkout/extra" ] && cp -r "$checkout/extra" "$scratch/src/"
fi

# the test environment: pytest (torch and hypothesis for the files that import them), and
# lazygrad built by maturin into it (cargo reuses the build of tools/setup.sh --python)
venv="$here/.venv-tinygrad"
requirements="$here/requirements-tinygrad-tests.txt"
(cd "$scratch/src" && grep -qlE '^(import torch|from hypothesis)' "${files[@]}") &&
  requirements="$here/requirements-tinygrad-tests-torch.txt"
[ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
stamp="$venv/installed-$(basename "$requirements")"
if ! cmp -s "$requirements" "$stamp"; then
  "$venv/bin/pip" install -q -r "$requirements"
  cp "$requirements" "$stamp"
fi
"$here/setup.sh" --python
(cd "$here/../python" && VIRTUAL_ENV="$venv" "$here/.venv-python/bin/maturin" develop --release -q)

leftout=()
while IFS= read -r line; do
  id=${line%%#*}; id=${id%"${id##*[![:space:]]}"}
  [ -n "$id" ] && leftout+=(--deselect "$id")
done < "$here/tinygrad_tests_leftout.txt"

out=${OUT:-$scratch/summary.md}
status=0
(cd "$scratch/src" && DEV=${DEV:-CPU} RUN_SLOW=${RUN_SLOW:-1} PYTHONPATH="$here/tinygrad_names:$scratch/src" \
  "$venv/bin/python" -m pytest "${files[@]}" -p no:cacheprovider -q --timeout="${TIMEOUT:-300}" \
  --junitxml="$scratch/results.xml" "${leftout[@]}") || status=$?
# pytest: 0 all passed, 1 some failed; anything else means the run itself broke
[ "$status" -le 1 ] || { echo "tinygrad_tests: pytest exited $status" >&2; exit "$status"; }
"$venv/bin/python" "$here/tinygrad_tests_summary.py" "$scratch/results.xml" "$here/tinygrad_tests_leftout.txt" \
  "${files[@]}" | tee "$out"
[ "${REQUIRE_ALL:-0}" != 1 ] || [ "$status" -eq 0 ]
