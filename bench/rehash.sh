#!/bin/bash
# Re-hash cost per 4 KiB write for a block-list client, ranges against
# whole-file, at 16 MiB, 256 MiB and 1 GiB (bench/rehash_cost.c).
#
#   bench/rehash.sh [WRITES [MIB...]]   (5 writes a size; other sizes)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$top/build/lib/libtrack.a" ] || { echo "build/lib/libtrack.a is missing: run make" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/rehash.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cc -O2 -D_GNU_SOURCE -I"$top/libtrack/include" -o "$dir/rehash_cost" \
	"$top/bench/rehash_cost.c" "$top/build/lib/libtrack.a" -lz -luring
pin=
command -v taskset >/dev/null && pin="taskset -c 0"
$pin "$dir/rehash_cost" "$dir" "${1:-5}" "${@:2}"
