#!/usr/bin/env bash
# Fetches the pinned JavaScript libraries the VIZ page loads and copies their minified builds and
# licenses into src/viz/web/vendor/ (committed, so the page works offline). Run it only to change
# a version; the build never runs it. Needs npm.
set -euo pipefail
cd "$(dirname "$0")/.."

DAGRE_VERSION=3.1.3  # @dagrejs/dagre: layered DAG layout (bundles graphlib), MIT

out=src/viz/web/vendor
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$tmp" && npm pack --silent "@dagrejs/dagre@$DAGRE_VERSION" >/dev/null && tar xzf dagrejs-dagre-*.tgz)
mkdir -p "$out"
# drop the trailing source-map comment: the map is not vendored
sed '/^\/\/# sourceMappingURL=/d' "$tmp/package/dist/dagre.min.js" >"$out/dagre.min.js"
cp "$tmp/package/LICENSE" "$out/dagre.LICENSE"
cp "$tmp/package/dist/dagre.min.js.LEGAL.txt" "$out/"
echo "@dagrejs/dagre $DAGRE_VERSION" >"$out/VERSIONS"
echo "vendored into $out: $(cat "$out/VERSIONS")"
