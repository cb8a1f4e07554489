#!/bin/bash
# Generate the in-tree dm-track patch from dm-track/, its one source of truth.
#
# Usage: scripts/gen-dm-track-patch.sh [--check]
#
# The patch adds drivers/md/dm-track*, include/uapi/linux/dm-track.h and
# Documentation/admin-guide/device-mapper/dm-track.rst (copies of the files
# in dm-track/), the Kconfig stanza from Kconfig.snippet, the Makefile lines
# from dm-track/Kbuild's object list, and index and MAINTAINERS entries. It
# is written to the kernel-patches/ file that kernel-patches/series names
# for dm-track. With --check it only says whether that file is up to date.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

check=0
[ "${1:-}" = "--check" ] && check=1

name=$(grep -m1 'dm-track' "$top/kernel-patches/series" 2>/dev/null || true)
[ -n "$name" ] || name=0001-dm-add-dm-track-target.patch
out="$top/kernel-patches/$name"

src=$(pristine_source)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

export GIT_AUTHOR_NAME="libtrack developers"
export GIT_AUTHOR_EMAIL="devel@libtrack.invalid"
export GIT_AUTHOR_DATE="2026-11-22T00:00:00+00:00"
export GIT_COMMITTER_NAME=$GIT_AUTHOR_NAME
export GIT_COMMITTER_EMAIL=$GIT_AUTHOR_EMAIL
export GIT_COMMITTER_DATE=$GIT_AUTHOR_DATE
g() { git -C "$work" -c core.autocrlf=false "$@"; }

touched="drivers/md/Kconfig drivers/md/Makefile MAINTAINERS
	Documentation/admin-guide/device-mapper/index.rst"
g init -q
for f in $touched; do
	mkdir -p "$work/$(dirname "$f")"
	cp "$src/$f" "$work/$f"
done
g add -A
g commit -q -m base

# Kconfig: the stanza goes after dm-era's.
awk -v snippet="$top/Kconfig.snippet" '
	/^config DM_CLONE$/ && !done {
		while ((getline line < snippet) > 0) print line
		print ""
		done = 1
	}
	{ print }
	END { if (!done) exit 1 }' "$src/drivers/md/Kconfig" >"$work/drivers/md/Kconfig" ||
	die "drivers/md/Kconfig has no DM_CLONE stanza to insert before"

# Makefile: the object list is dm-track/Kbuild's.
objs=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$top/dm-track/Kbuild" |
	sed -n 's/^dm-track-y[[:space:]]*+=//p' | xargs)
[ -n "$objs" ] || die "dm-track/Kbuild lists no objects"
awk -v objs="$objs" '
	{ print }
	/^dm-era-y[[:space:]]/ {
		n = split(objs, o, " ")
		printf "dm-track-y\t+= %s %s", o[1], o[2]
		for (i = 3; i <= n; i += 2)
			printf " \\\n\t\t   %s%s", o[i], i < n ? " " o[i + 1] : ""
		printf "\n"
		a = 1
	}
	/^obj-\$\(CONFIG_DM_ERA\)/ { print "obj-$(CONFIG_DM_TRACK)\t\t+= dm-track.o"; b = 1 }
	END { if (!a || !b) exit 1 }' "$src/drivers/md/Makefile" >"$work/drivers/md/Makefile" ||
	die "drivers/md/Makefile has no dm-era lines to follow"

awk '/^    dm-uevent$/ && !done { print "    dm-track"; done = 1 } { print }' \
	"$src/Documentation/admin-guide/device-mapper/index.rst" \
	>"$work/Documentation/admin-guide/device-mapper/index.rst"

# The maintainer is the patch's author.
maint="$GIT_AUTHOR_NAME <$GIT_AUTHOR_EMAIL>"
awk -v maint="$maint" '/^DEVICE-MAPPER VDO TARGET$/ && !done {
		print "DEVICE-MAPPER TRACK TARGET"
		print "M:\t" maint
		print "L:\tdm-devel@lists.linux.dev"
		print "S:\tMaintained"
		print "Q:\thttp://patchwork.kernel.org/project/dm-devel/list/"
		print "T:\tgit git://git.kernel.org/pub/scm/linux/kernel/git/device-mapper/linux-dm.git"
		print "F:\tDocumentation/admin-guide/device-mapper/dm-track.rst"
		print "F:\tdrivers/md/dm-track*"
		print "F:\tinclude/uapi/linux/dm-track.h"
		print ""
		done = 1
	}
	{ print }' "$src/MAINTAINERS" >"$work/MAINTAINERS"

# In tree, dm-track builds against the kernel it is part of: the copies
# drop dm-track-compat.h (the #include and the blank line after it), write
# each compat_*() wrapper back as the statement it stands for, and leave out
# the part of dm-track.rst between the dm-track-compat-begin and -end
# comments (with the blank line before it), which is about older kernels.
intree() {
	awk '
		/^#include "dm-track-compat\.h"$/ { skip = 1; next }
		skip && /^$/ { skip = 0; next }
		{ skip = 0 }
		/^\.\. dm-track-compat-begin$/ { out = 1; blank = 0; next }
		/^\.\. dm-track-compat-end$/ { out = 0; next }
		out { next }
		/^$/ { if (blank) print ""; blank = 1; next }
		{ if (blank) print ""; blank = 0; print }
		END { if (blank) print "" }' "$1" |
		sed 's/compat_set_flush_bypasses_map(\([^)]*\))/\1->flush_bypasses_map = true/' \
		>"$2"
	if grep -n 'compat' "$2" >&2; then
		die "$1 still uses dm-track-compat.h after mapping back; teach intree() in $(basename "$0") its new wrapper"
	fi
}

for o in $objs; do
	intree "$top/dm-track/${o%.o}.c" "$work/drivers/md/${o%.o}.c"
done
intree "$top/dm-track/dm-track.h" "$work/drivers/md/dm-track.h"
mkdir -p "$work/include/uapi/linux"
cp "$top/dm-track/include/uapi/linux/dm-track.h" "$work/include/uapi/linux/"
intree "$top/dm-track/dm-track.rst" \
	"$work/Documentation/admin-guide/device-mapper/dm-track.rst"

g add -A
g commit -q -F - <<'EOF'
dm: add dm-track, a target that records which blocks were written

Backing up or replicating a large block device every hour means finding
the blocks that changed since the last run. Tools that find them after
the fact (rsync, blockwise checksums) read the whole device each time;
dm-era records eras per block but needs a metadata btree entry per block
and gives no race-free way to hand a set of blocks to a copier.

dm-track passes I/O through to one device and keeps the written blocks
in a two-level bitmap whose leaves are allocated on first write, so its
memory grows with what is dirty. A "freeze" message atomically moves
the active set into a frozen epoch; the frozen set is read with a
generic netlink dump, copied, and dropped with "commit" or given back
with "abort", both refused for a stale epoch. Writes are marked when
mapped and again when they complete, so a write in flight across a
freeze also lands in the next epoch and no write is ever untracked.

An optional metadata device keeps the set across a clean shutdown;
a write-intent map of coarse regions, written in batches before the
first write to a region after a checkpoint, bounds what a crash marks
dirty to the regions written since.

Signed-off-by: libtrack developers <devel@libtrack.invalid>
EOF

# A blank context line is written empty, not as one space: patch and git
# apply read it the same, and the series file then has no trailing
# whitespace for checkpatch to find when it checks the repository itself.
g format-patch -q -1 --stdout --zero-commit --no-signature |
	sed 's/^ $//' >"$work/out.patch"

if [ $check = 1 ]; then
	if ! cmp -s "$work/out.patch" "$out"; then
		echo "kernel-patches/$name is stale: run 'make dm-track-patch'" >&2
		diff -u "$out" "$work/out.patch" | head -n 40 >&2 || true
		exit 1
	fi
	exit 0
fi
cp "$work/out.patch" "$out"
grep -qxF "$name" "$top/kernel-patches/series" 2>/dev/null ||
	echo "$name" >>"$top/kernel-patches/series"
echo "wrote kernel-patches/$name"
