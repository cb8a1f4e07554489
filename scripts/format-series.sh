#!/bin/bash
# Write the inotify series (kernel-patches/0002-...) from a kernel git tree
# whose commits BASE..HEAD are the series, the same way every time, so
# that a re-export changes only what changed.
#
# Usage: scripts/format-series.sh KERNEL_GIT_DIR BASE
#
# The tree may hold only the files the series touches (commit them as
# BASE, then `git am` the patches). Blank context lines are written empty,
# as scripts/gen-dm-track-patch.sh writes 0001: checkpatch, run over the
# repository, would take a lone space for trailing whitespace.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# = 2 ] || die "usage: format-series.sh KERNEL_GIT_DIR BASE"
git=(git -C "$1" -c core.abbrev=9)
out="$top/kernel-patches"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"${git[@]}" format-patch -q --zero-commit -N --start-number 2 \
	--no-signature -o "$tmp" "$2..HEAD"
rm -f "$out"/000[2-9]-*.patch "$out"/00[1-9][0-9]-*.patch
for p in "$tmp"/*.patch; do
	sed 's/^ $//' "$p" >"$out/$(basename "$p")"
done
{
	echo "0001-dm-add-dm-track-target.patch"
	(cd "$tmp" && ls -- *.patch)
} >"$out/series"
echo "format-series: $(ls "$tmp" | wc -l) patches into kernel-patches/"
