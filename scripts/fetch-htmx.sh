#!/usr/bin/env bash
# Fetches the console's pinned htmx from the npm registry (npm pack) and
# checks it against console/static/README.md; with --write it replaces
# console/static/htmx.min.js. Nothing else needs Node.js.
set -euo pipefail
cd "$(dirname "$0")/.."
version=2.0.11
tgz_sum=165a2655073e9e6e55e307a7c74e8ebcdb76afb7701f9c16cfd106a13add408e
js_sum=d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "htmx.org@$version" >/dev/null)
echo "$tgz_sum  $tmp/htmx.org-$version.tgz" | sha256sum -c --quiet
tar -xzf "$tmp/htmx.org-$version.tgz" -C "$tmp" package/dist/htmx.min.js
echo "$js_sum  $tmp/package/dist/htmx.min.js" | sha256sum -c --quiet
if [ "${1:-}" = --write ]; then
  cp "$tmp/package/dist/htmx.min.js" console/static/htmx.min.js
fi
echo "$js_sum  console/static/htmx.min.js" | sha256sum -c
