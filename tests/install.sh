#!/bin/bash
# `make install` into a DESTDIR gives a library that a sync client builds
# against with nothing but `pkg-config --cflags --libs libtrack`, shared
# and static, plus the header, the man pages and the tools.
# timeout: 300
. "$(dirname "$0")/lib.sh"

dest=$TMP/root
if ! make -s -C "$TOP" install DESTDIR="$dest" PREFIX=/usr >"$TMP/install.log" 2>&1; then
	cat "$TMP/install.log"
	not_ok "make install DESTDIR=... PREFIX=/usr"
	done_testing
fi
ok "make install DESTDIR=... PREFIX=/usr"

for f in usr/lib/libtrack.so.2 usr/lib/libtrack.so usr/lib/libtrack.a \
	usr/lib/libtrack-dm.so.2 usr/lib/libtrack-dm.a usr/lib/pkgconfig/libtrack-dm.pc \
	usr/include/libtrack.h usr/include/libtrack/dm.h \
	usr/lib/pkgconfig/libtrack.pc usr/share/man/man3/track_dm_open.3 \
	usr/share/man/man8/dmtrack.8 usr/bin/dmtrack; do
	check "installs $f" test -e "$dest/$f"
done

export PKG_CONFIG_SYSROOT_DIR=$dest
export PKG_CONFIG_PATH=$dest/usr/lib/pkgconfig
src=$TOP/examples/dm-status.c
# shellcheck disable=SC2046
if cc -Werror -o "$TMP/client" "$src" $(pkg-config --cflags --libs libtrack-dm) &&
	out=$(LD_LIBRARY_PATH=$dest/usr/lib "$TMP/client") &&
	[ "$out" = "libtrack 2.0" ]; then
	ok "a client builds with pkg-config and runs against the shared library"
else
	not_ok "a client builds with pkg-config and runs against the shared library ($out)"
fi
if readelf -d "$TMP/client" | grep -q 'NEEDED.*libtrack-dm\.so\.2'; then
	ok "the client records the soname libtrack-dm.so.2"
else
	not_ok "the client records the soname libtrack-dm.so.2"
fi
# shellcheck disable=SC2046
if cc -Werror -o "$TMP/client-static" "$src" \
	-Wl,-Bstatic $(pkg-config --cflags --libs libtrack-dm) -Wl,-Bdynamic \
	$(pkg-config --static --libs-only-l libtrack-dm | sed 's/-ltrack-dm//; s/-ltrack//') &&
	[ "$("$TMP/client-static")" = "libtrack 2.0" ] &&
	! readelf -d "$TMP/client-static" | grep -q 'libtrack.*\.so'; then
	ok "a client links the static library with pkg-config --static"
else
	not_ok "a client links the static library with pkg-config --static"
fi
if LD_LIBRARY_PATH=$dest/usr/lib "$TMP/client" nonexistent-device >/dev/null 2>"$TMP/err"; then
	not_ok "the client reports a missing device"
else
	grep -q "nonexistent-device" "$TMP/err" && ok "the client reports a missing device" ||
		not_ok "the client reports a missing device: $(cat "$TMP/err")"
fi
done_testing
