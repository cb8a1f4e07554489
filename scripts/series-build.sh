#!/bin/bash
# Build every prefix of kernel-patches/series on its own: for k = 1..N,
# the source tree with patches 1..k applied, configured from tinyconfig plus
# a fragment, built with `make vmlinux modules`. A series whose patch k
# only builds together with patch k+1 cannot be bisected or taken in part;
# this finds it.
#
# Usage: scripts/series-build.sh [--from K] SOURCE_TREE FRAGMENT [WORKDIR]
#
# SOURCE_TREE is an unpacked kernel (Debian's linux-source-6.12, or an
# upstream tree); it is never modified. FRAGMENT is a kernel config
# fragment merged on top of tinyconfig (selftests/config is the test
# kernel's; every option it sets must survive olddefconfig). WORKDIR
# (default $LIBTRACK_CACHE/series-build) holds one hard-linked copy of the
# source, to which the patches are applied one at a time, and one build
# directory reused for every prefix, so each build recompiles only what the
# next patch changed. Applying 1..k one after another gives the same tree
# as applying them to a clean copy; a patch that does not apply stops the
# run. --from K starts at prefix K (patches 1..K-1 are applied unbuilt).
#
# Prints one line per prefix ("prefix K/N PATCH: ok, S s" or "FAILED") and
# keeps each build's log in WORKDIR/build-K.log. Exit status: 0 when every
# prefix built, 1 when one did not (the run stops there), 2 on usage.
#
# Environment:
#   LIBTRACK_CACHE   cache root (default ~/.cache/libtrack); ccache lives in
#                    its ccache/, shared with scripts/kernel.sh
#   JOBS             parallel make jobs (default 2)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

from=1
if [ "${1:-}" = --from ]; then
	from=${2:-}
	shift 2 || true
fi
case "$from" in '' | *[!0-9]*) from=0 ;; esac
if [ $# -lt 2 ] || [ $# -gt 3 ] || [ "$from" -lt 1 ]; then
	echo "usage: scripts/series-build.sh [--from K] SOURCE_TREE FRAGMENT [WORKDIR]" >&2
	exit 2
fi
[ -d "$1" ] || die "$1: no such source tree"
srctree=$(cd "$1" && pwd)
if [ ! -f "$srctree/Makefile" ] || [ ! -d "$srctree/kernel" ]; then
	die "$srctree does not look like a kernel source tree (no Makefile or kernel/)"
fi
[ -f "$2" ] || die "$2: no such config fragment"
fragment=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
cache=${LIBTRACK_CACHE:-$HOME/.cache/libtrack}
work=${3:-$cache/series-build}
jobs=${JOBS:-2}

series="$top/kernel-patches/series"
[ -f "$series" ] || die "$series is missing"
patches=()
while read -r p _; do
	case "$p" in '' | '#'*) continue ;; esac
	[ -f "$top/kernel-patches/$p" ] ||
		die "kernel-patches/series names $p, which does not exist"
	patches+=("$p")
done <"$series"
n=${#patches[@]}
[ "$from" -le "$n" ] || die "--from $from: the series has only $n patches"

src="$work/src"
obj="$work/build"
mkdir -p "$work"
exec 9>"$work/.lock"
flock -n 9 || die "another series-build.sh is running in $work"

# A fresh hard-linked copy: GNU patch replaces the files it changes, so the
# original tree is never written to.
rm -rf "$src"
cp -al "$srctree" "$src"
mkdir -p "$obj"

kmake() {
	nice -n 19 make -C "$src" O="$obj" ARCH=x86_64 "$@"
}

cc=gcc
if command -v ccache >/dev/null; then
	export CCACHE_DIR="$cache/ccache" CCACHE_BASEDIR="$work" CCACHE_NOHASHDIR=1
	export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
	cc="ccache gcc"
fi

echo "series-build: $srctree, $n patches, fragment $fragment, in $work"
status=0
for ((k = 1; k <= n; k++)); do
	p=${patches[k - 1]}
	if ! patch -d "$src" -p1 --batch --forward --quiet \
		<"$top/kernel-patches/$p" >"$work/apply-$k.log" 2>&1; then
		echo "prefix $k/$n $p: DOES NOT APPLY"
		sed 's/^/  /' "$work/apply-$k.log"
		status=1
		break
	fi
	[ "$k" -ge "$from" ] || continue

	# tinyconfig, then the fragment; what the fragment asks for must stick
	# (a prefix may not yet add an option the fragment names, e.g.
	# CONFIG_DM_TRACK before 0001: only options the tree knows count).
	kmake -s tinyconfig >/dev/null
	"$src/scripts/kconfig/merge_config.sh" -m -O "$obj" "$obj/.config" \
		"$fragment" >/dev/null
	kmake -s olddefconfig >/dev/null
	find "$src" -name 'Kconfig*' -exec sed -n \
		's/^[[:space:]]*\(menu\)\{0,1\}config[[:space:]]\{1,\}\([A-Z0-9_]*\).*/CONFIG_\2/p' \
		{} + | sort -u >"$work/known"
	lost=$(grep '^CONFIG_.*=' "$fragment" | while read -r line; do
		grep -qxF "${line%%=*}" "$work/known" || continue
		grep -qxF "$line" "$obj/.config" || echo "$line"
	done)
	if [ -n "$lost" ]; then
		echo "prefix $k/$n $p: config options did not stick: $lost"
		status=1
		break
	fi

	start=$(date +%s)
	if kmake -j"$jobs" CC="$cc" vmlinux modules >"$work/build-$k.log" 2>&1; then
		warn=$(grep -c ': warning:' "$work/build-$k.log" || true)
		echo "prefix $k/$n $p: ok, $(($(date +%s) - start)) s, $warn warnings"
	else
		echo "prefix $k/$n $p: FAILED after $(($(date +%s) - start)) s (log: $work/build-$k.log)"
		grep -E 'error|Error' "$work/build-$k.log" | head -n 20 | sed 's/^/  /'
		status=1
		break
	fi
done
echo "series-build: build directory $(du -sh "$obj" | cut -f1) ($obj)"
exit $status
