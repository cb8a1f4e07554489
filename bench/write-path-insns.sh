#!/bin/bash
# What a write(2) costs the kernel with the write-range series and without
# it, in guest instructions, counted exactly by QEMU (the TCG plugin
# bench/insns/tbcount.c) and split by function (bench/insns/profile.py).
# Each boot runs bench/insns/write_loop.c as /init: N writes of 4 KiB to a
# file on tmpfs, unwatched, or watched by plain inotify or fanotify, or by
# a group that asked for ranges (the patched kernel only), nobody reading.
# Only the writes are counted: the guest calls sync() before and after
# them, and the plugin counts from one entry into the kernel's sync(2) to
# the next. The guest runs on QEMU's instruction clock (-icount), so even
# the timer interrupts among the writes come at the same instructions:
# the same kernel and case count the same on any host, under any load.
#
# Usage: bench/write-path-insns.sh [nodebug|debug]...  (default: both)
#   nodebug  both kernels without debug checks (scripts/kernel.sh with
#            LIBTRACK_KDEBUG=0), configured as a distribution would: what
#            users pay
#   debug    the test kernels (KASAN, lockdep): KASAN records the stack at
#            every allocation and free, so there each frame between a
#            write and an event's allocation costs a few hundred
#            instructions
# Environment: N (writes per boot, default 20000), OUT (build/insns)
# Exit status: 0, 1 when a build or a boot fails, 2 for bad usage.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
n=${N:-20000}
out=${OUT:-$top/build/insns}
configs=${*:-nodebug debug}

for c in $configs; do
	case $c in nodebug | debug) ;;
	*) echo "usage: bench/write-path-insns.sh [nodebug|debug]..." >&2; exit 2 ;;
	esac
done
mkdir -p "$out/root"
cc -O2 -Wall -shared -fPIC -fvisibility=hidden -o "$out/libtbcount.so" \
	"$top/bench/insns/tbcount.c"
cc -O2 -Wall -static -o "$out/root/init" "$top/bench/insns/write_loop.c"
(cd "$out/root" && echo init | cpio -o -H newc --quiet >"$out/init.cpio")

# boot KIMAGE MARK MODE N COUNTS: one guest run, its counts into COUNTS
boot() {
	local log

	rm -f "$5"
	log=$(timeout 1800 qemu-system-x86_64 -accel tcg -icount shift=0 \
		-m 1G -smp 1 -nographic -no-reboot -kernel "$1" \
		-initrd "$out/init.cpio" \
		-append "console=ttyS0 nokaslr quiet panic=-1 mode=$3 n=$4" \
		-plugin "$out/libtbcount.so,out=$5,mark=$2" 2>&1) || true
	if ! grep -aq "write-loop: mode $3, $4 writes: ok" <<<"$log" ||
		[ ! -s "$5" ]; then
		echo "write-path-insns: boot $3 n=$4 on $1 failed:" >&2
		grep -a 'write-loop\|tbcount\|panic\|BUG' <<<"$log" >&2 || true
		exit 1
	fi
}

for config in $configs; do
	dir=$out/$config
	mkdir -p "$dir"
	for kernel in unpatched patched; do
		flag=
		[ $kernel = unpatched ] && flag=--unpatched
		env=kernel${flag:+-unpatched}
		if [ "$config" = nodebug ]; then
			LIBTRACK_KDEBUG=0 "$top/scripts/kernel.sh" $flag >&2
			env=$env-nodebug
		else
			"$top/scripts/kernel.sh" $flag >&2
		fi
		# shellcheck disable=SC1090
		. "$top/build/$env.env"
		nm "$KBUILD/vmlinux" >"$dir/$kernel.nm"
		mark=$(awk '$3 == "__x64_sys_sync" { print $1 }' "$dir/$kernel.nm")
		[ -n "$mark" ] || { echo "write-path-insns: no __x64_sys_sync in $KBUILD/vmlinux" >&2; exit 1; }
		modes="none inotify fanotify"
		[ $kernel = patched ] && modes="$modes inotify-ranges fanotify-ranges"
		for mode in $modes; do
			echo "write-path-insns: $config $kernel $mode" >&2
			boot "$KIMAGE" "$mark" "$mode" "$n" "$dir/$kernel-$mode.txt"
		done
	done
	echo "write(2) of 4 KiB to a file on tmpfs, guest instructions per write," \
		"$config kernels ($n writes a boot, nobody reading the events)"
	/usr/bin/python3 "$top/bench/insns/profile.py" "$dir" "$n" "$config"
	echo
done
