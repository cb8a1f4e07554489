#!/bin/bash
# Kernel code reads like upstream: the in-tree dm-track patch is what
# scripts/gen-dm-track-patch.sh makes of dm-track/ today, every patch in the
# series and every dm-track source passes checkpatch.pl --strict, and the
# series file names only patches that exist.
# timeout: 600
. "$(dirname "$0")/lib.sh"
. "$TOP/scripts/lib.sh"

command -v dpkg-query >/dev/null && [ -f /usr/src/linux-source-6.12.tar.xz ] ||
	skip_all "linux-source-6.12 is not installed (scripts/deps.sh installs it)"
src=$(pristine_source 2>/dev/null)
checkpatch() {
	# From the kernel tree, which is not a git checkout: checkpatch would
	# otherwise hand our .git to scripts/spdxcheck.py.
	(cd "$src" && perl scripts/checkpatch.pl --strict -q --no-summary "$@")
}

if out=$("$TOP/scripts/gen-dm-track-patch.sh" --check 2>&1); then
	ok "the in-tree dm-track patch is generated from dm-track/"
else
	not_ok "the in-tree dm-track patch is generated from dm-track/"
	echo "$out" | sed 's/^/# /'
fi

while read -r p _; do
	case "$p" in '' | '#'*) continue ;; esac
	if [ ! -f "$TOP/kernel-patches/$p" ]; then
		not_ok "kernel-patches/series names $p, which does not exist"
		continue
	fi
	if out=$(checkpatch "$TOP/kernel-patches/$p" 2>&1) && [ -z "$out" ]; then
		ok "checkpatch --strict: $p"
	else
		not_ok "checkpatch --strict: $p"
		echo "$out" | head -n 30 | sed 's/^/# /'
	fi
done <"$TOP/kernel-patches/series"

for f in "$TOP"/dm-track/*.[ch] "$TOP"/dm-track/include/uapi/linux/*.h; do
	case "$f" in *.mod.c) continue ;; esac
	name=${f#"$TOP"/}
	# dm-track-compat.h exists to test LINUX_VERSION_CODE, never goes in
	# tree (the patch above drops it), and its genl_info_dump() must name
	# its argument twice to build a genl_info in the caller's scope.
	ignore=
	case "$f" in */dm-track-compat.h)
		ignore=--ignore=LINUX_VERSION_CODE,CONSTANT_COMPARISON,MACRO_ARG_REUSE ;;
	esac
	if out=$(checkpatch --no-tree $ignore -f "$f" 2>&1) && [ -z "$out" ]; then
		ok "checkpatch --strict: $name"
	else
		not_ok "checkpatch --strict: $name"
		echo "$out" | head -n 30 | sed 's/^/# /'
	fi
done
done_testing
