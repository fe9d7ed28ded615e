#!/usr/bin/env bash
# Fails when a tracked file is over LIMIT bytes (1 MiB) and not on the
# allow-list below: build output (a committed binary once made up 92% of the
# repository's pack) never lands by accident. Add a file here only when it is
# a document the project needs whole, and say why beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=${LIMIT:-1048576}
# Allowed large files, one path a line (none today).
allow=(
)
status=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  size=$(stat -c %s "$f")
  [ "$size" -gt "$LIMIT" ] || continue
  allowed=false
  for a in "${allow[@]+"${allow[@]}"}"; do [ "$a" = "$f" ] && allowed=true; done
  if ! $allowed; then
    echo "check-large-files: $f is $size bytes (over $LIMIT) and not on the allow-list in scripts/check-large-files.sh" >&2
    status=1
  fi
done < <(git ls-files -z)
[ $status -eq 0 ] && echo "check-large-files: no tracked file over $LIMIT bytes outside the allow-list"
exit $status
