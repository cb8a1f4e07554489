#!/bin/bash
# Build the VM selftests (selftests/<area>/*.c and *.sh) into build/selftests,
# against the patched kernel's uapi headers and the kernel's own
# kselftest_harness.h, and collect every area's tests.list into one.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
load_kernel_env

out="$top/build/selftests"
cc=${CC:-cc}
cflags="-O2 -g -D_GNU_SOURCE -Wall -Werror
	-isystem $KHDR -I$KSRC/tools/testing/selftests -I$top/selftests/harness
	-I$top/libtrack/include"
libs="$top/build/lib/libtrack-dm.a $top/build/lib/libtrack.a $(pkg-config --libs libmnl devmapper zlib) -l:liburing.a -lpthread"

mkdir -p "$out"
: >"$out/tests.list.new"
# platform first: its demo entry says which kernel is up.
seen=
for dir in "$top"/selftests/platform/ "$top"/selftests/*/; do
	area=$(basename "$dir")
	case "$area" in vm | harness) continue ;; esac
	case " $seen " in *" $area "*) continue ;; esac
	seen="$seen $area"
	mkdir -p "$out/$area"
	for src in "$dir"*.c; do
		[ -f "$src" ] || continue
		bin="$out/$area/$(basename "$src" .c)"
		if [ ! -x "$bin" ] || [ -n "$(find "$src" "$dir"*.h "$top/selftests/harness" \
			"$top/build/lib/libtrack.a" -newer "$bin" 2>/dev/null | head -n 1)" ] ||
			[ "$KHDR" -nt "$bin" ]; then
			echo "  CC      selftests/$area/$(basename "$src")"
			# shellcheck disable=SC2086
			$cc $cflags -o "$bin" "$src" $libs
		fi
	done
	for sh in "$dir"*.sh; do
		[ -f "$sh" ] || continue
		install -m 755 "$sh" "$out/$area/"
	done
	# data the scripts read (e.g. uds/logtrace.txt, a replayed log trace)
	for data in "$dir"*.txt; do
		[ -f "$data" ] || continue
		install -m 644 "$data" "$out/$area/"
	done
	if [ -f "$dir/tests.list" ]; then
		cat "$dir/tests.list" >>"$out/tests.list.new"
	fi
done
mv "$out/tests.list.new" "$out/tests.list"
