#!/bin/bash
# What a sync-client author gets from an installed libtrack: every example
# builds from the installed headers with nothing but pkg-config, a client
# that only watches files (or reads streams) needs none of the
# device-mapper libraries and no .pc file of theirs, and the examples run.
# A non-root user builds and installs the tree, and a missing build
# dependency is named.
# timeout: 600
. "$(dirname "$0")/lib.sh"

dest=$TMP/root
if ! make -s -C "$TOP" install DESTDIR="$dest" PREFIX=/usr >"$TMP/install.log" 2>&1; then
	cat "$TMP/install.log"
	not_ok "make install DESTDIR=... PREFIX=/usr"
	done_testing
fi
ok "make install DESTDIR=... PREFIX=/usr"
for f in usr/share/man/man7/libtrack.7 usr/share/man/man3/track_extents_new.3 \
	usr/share/doc/libtrack/stream-format.md \
	usr/share/doc/libtrack/examples/blocklist.c \
	usr/lib/pkgconfig/libtrack.pc usr/lib/pkgconfig/libtrack-dm.pc; do
	check "installs $f" test -e "$dest/$f"
done

# pkg-config sees the installed libtrack.pc and the .pc files of what
# libtrack links (zlib, liburing), nothing else: no libmnl.pc, no
# devmapper.pc.
pc=$TMP/pc
mkdir -p "$pc"
cp "$dest/usr/lib/pkgconfig/libtrack.pc" "$pc/"
for p in zlib liburing; do
	cp "$(pkg-config --variable=pcfiledir $p)/$p.pc" "$pc/"
done
export PKG_CONFIG_SYSROOT_DIR=$dest
flags=$(PKG_CONFIG_LIBDIR=$pc pkg-config --cflags --libs libtrack 2>"$TMP/pc.err")
if [ $? -eq 0 ] && [ -n "$flags" ]; then
	ok "pkg-config --cflags --libs libtrack needs no .pc of the dm libraries ($flags)"
else
	not_ok "pkg-config --cflags --libs libtrack without dm .pc files: $(cat "$TMP/pc.err")"
fi

bin=$TMP/bin
mkdir -p "$bin"
for src in "$dest"/usr/share/doc/libtrack/examples/*.c; do
	name=$(basename "$src" .c)
	case $name in
	dm-*)
		# libtrack-dm: its .pc needs libmnl's and devmapper's.
		cflags=$(PKG_CONFIG_PATH=$dest/usr/lib/pkgconfig \
			pkg-config --cflags --libs libtrack-dm) ;;
	*) cflags=$(PKG_CONFIG_LIBDIR=$pc pkg-config --cflags --libs libtrack) ;;
	esac
	# shellcheck disable=SC2086
	if cc -Wall -Werror -o "$bin/$name" "$src" $cflags 2>"$TMP/cc.err"; then
		ok "example $name builds against the installed tree"
	else
		not_ok "example $name builds against the installed tree: $(head -5 "$TMP/cc.err")"
	fi
done

export LD_LIBRARY_PATH=$dest/usr/lib
for name in watch-tree stream-pipe batch-lines blocklist dsync-socket; do
	[ -x "$bin/$name" ] || continue
	libs=$(ldd "$bin/$name")
	bad=$(echo "$libs" | grep -E -o 'lib(devmapper|udev|selinux|pcre2[^ ]*|mnl)\.so[^ ]*' | tr '\n' ' ')
	if [ -z "$bad" ] && echo "$libs" | grep -q "libtrack\.so\.2 => $dest"; then
		ok "$name loads libtrack.so.2 and none of the dm libraries"
	else
		not_ok "$name: dm libraries $bad in: $libs"
	fi
done
if readelf -d "$bin/dm-status" | grep -q 'NEEDED.*libtrack-dm\.so\.2'; then
	ok "dm-status records libtrack-dm.so.2"
else
	not_ok "dm-status records libtrack-dm.so.2"
fi

# They run.
w=$TMP/tree
mkdir -p "$w/sub"
(sleep 0.5; echo hi >"$w/sub/f"; mv "$w/sub/f" "$w/g") &
out=$("$bin/watch-tree" -t 1 "$w")
wait
if echo "$out" | grep -q "^create $w:sub/f" &&
	echo "$out" | grep -q "^delete $w:sub/f\|^rename $w:g (was sub/f)"; then
	ok "watch-tree reports a create and the move"
else
	not_ok "watch-tree output: $out"
fi

head -c 300000 /dev/urandom >"$TMP/img"
"$bin/stream-pipe" write "$TMP/img" >"$TMP/s"
if "$bin/stream-pipe" read <"$TMP/s" | grep -q '^complete: 1 records, 74 data'; then
	ok "stream-pipe writes and reads back a stream"
else
	not_ok "stream-pipe round trip"
fi
# Fed through a pipe in pieces: the non-blocking reader sees -EAGAIN.
if { head -c 100000 "$TMP/s"; sleep 0.3; tail -c +100001 "$TMP/s"; } |
	"$bin/stream-pipe" read | grep -q '^complete'; then
	ok "stream-pipe reads a stream that arrives in pieces"
else
	not_ok "stream-pipe reads a stream that arrives in pieces"
fi
head -c 200000 "$TMP/s" | "$bin/stream-pipe" read >/dev/null 2>&1
rc=$?
[ $rc -eq 3 ] && ok "a truncated stream is told apart (exit 3)" ||
	not_ok "a truncated stream exits $rc, not 3"
head -c 200000 "$TMP/s" >"$TMP/bad"
# Flip the byte (setting it to a fixed value is no change 1 time in 256).
byte=$(od -An -tu1 -j150000 -N1 "$TMP/bad" | tr -d ' ')
printf "\\$(printf %03o $((byte ^ 0xff)))" |
	dd of="$TMP/bad" bs=1 seek=150000 conv=notrunc 2>/dev/null
tail -c +200001 "$TMP/s" >>"$TMP/bad"
"$bin/stream-pipe" read <"$TMP/bad" >/dev/null 2>&1
rc=$?
[ $rc -eq 1 ] && ok "a corrupt stream is rejected (exit 1)" ||
	not_ok "a corrupt stream exits $rc, not 1"

out=$( (echo a; sleep 0.4; echo b) | "$bin/batch-lines" -t 100)
if [ "$(echo "$out" | grep -c '^push')" = 2 ] &&
	echo "$out" | head -1 | grep -q '^push (timer): 1 updates'; then
	ok "batch-lines pushes on the timer"
else
	not_ok "batch-lines pushes on the timer: $out"
fi

# blocklist: the kept list after changes equals a fresh scan.
b=$TMP/bl
mkdir -p "$b/d"
head -c 400000 /dev/urandom >"$b/d/x"
"$bin/blocklist" -o "$TMP/kept" "$b" 2>"$TMP/bl.err" &
pid=$!
sleep 0.5
printf 'changed' | dd of="$b/d/x" bs=1 seek=200000 conv=notrunc 2>/dev/null
head -c 5000 /dev/urandom >"$b/y"
mv "$b/d" "$b/e"
sleep 0.5
kill -TERM $pid
wait $pid
"$bin/blocklist" --scan "$b" >"$TMP/fresh"
if [ -s "$TMP/fresh" ] && cmp -s "$TMP/kept" "$TMP/fresh"; then
	ok "blocklist keeps the same list as a fresh scan"
else
	not_ok "blocklist list differs: $(diff "$TMP/kept" "$TMP/fresh" | head -5)"
fi

# dsync-socket: the dsync engine embedded on both ends of a Unix socket.
d=$TMP/ds
mkdir -p "$d"
head -c 1000000 /dev/urandom >"$d/src"
ds_send() {	# EXPECTED-RC ARGS...: run a receiver, send to it
	local want=$1 rc
	shift
	"$bin/dsync-socket" receive -s "$d/state" -u "$d/undo" "$d/sock" \
		"$d/tgt" >"$d/recv.out" 2>"$d/recv.err" &
	local pid=$!
	for _ in $(seq 50); do [ -S "$d/sock" ] && break; sleep 0.1; done
	"$bin/dsync-socket" send "$@" >"$d/send.out" 2>"$d/send.err"
	rc=$?
	wait $pid
	[ $rc = "$want" ]
}
if ds_send 0 "$d/sock" "$d/src" && cmp -s "$d/src" "$d/tgt" &&
	grep -q '^epoch 1$' "$d/state"; then
	ok "dsync-socket seeds a new replica with a full stream"
else
	not_ok "dsync-socket full stream: $(cat "$d/send.err" "$d/recv.err")"
fi
printf 'XXXX' | dd of="$d/src" bs=1 seek=50000 conv=notrunc 2>/dev/null
printf 'YYYY' | dd of="$d/src" bs=1 seek=900000 conv=notrunc 2>/dev/null
if ds_send 0 -e 1 "$d/sock" "$d/src" 12-12 219-219 &&
	cmp -s "$d/src" "$d/tgt" && grep -q '^epoch 2$' "$d/state" &&
	grep -q '^applied epoch 1 to 2 .*: 2 data blocks' "$d/recv.out"; then
	ok "dsync-socket sends only the changed blocks, and they apply"
else
	not_ok "dsync-socket incremental: $(cat "$d/send.err" "$d/recv.err")"
fi
cp "$d/tgt" "$d/before"
if ds_send 1 -e 0 "$d/sock" "$d/src" 1-1 && cmp -s "$d/tgt" "$d/before" &&
	grep -q 'refusing the stream: .* not newer than epoch 2' "$d/recv.err"; then
	ok "dsync-socket: a stale stream is refused and changes nothing"
else
	not_ok "dsync-socket stale stream: $(cat "$d/send.err" "$d/recv.err")"
fi

# A non-root user builds and installs a copy of the tree.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
	src=$TMP/src
	mkdir -p "$src"
	# The working tree as it is, committed or not; no build/.
	git -C "$TOP" ls-files -z -c -o --exclude-standard |
		(cd "$TOP" && xargs -0 cp --parents -t "$src" 2>/dev/null)
	chown -R nobody "$TMP"
	chmod 755 "$TMP"
	if setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME="$TMP" \
		nice make -s -C "$src" -j2 >"$TMP/nobody.log" 2>&1 &&
		setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME="$TMP" \
			make -s -C "$src" install DESTDIR="$TMP/nroot" >>"$TMP/nobody.log" 2>&1 &&
		[ -e "$TMP/nroot/usr/local/lib/libtrack.so.2" ]; then
		ok "a non-root user runs make && make install DESTDIR=..."
	else
		not_ok "non-root make && make install: $(tail -5 "$TMP/nobody.log")"
	fi
else
	ok "# SKIP non-root build: not root, or no setpriv"
fi

# A missing build dependency is named, and the VM's are not asked for.
fake=$TMP/fake
mkdir -p "$fake"
cat >"$fake/dpkg-query" <<'EOS'
#!/bin/sh
for last; do :; done
[ "$last" = libmnl-dev ] && exit 1
echo 'install ok installed'
EOS
chmod +x "$fake/dpkg-query"
out=$(PATH=$fake:$PATH "$TOP/scripts/deps.sh" --check build 2>&1)
rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q libmnl-dev &&
	! echo "$out" | grep -q qemu; then
	ok "deps.sh names the missing build package ($out)"
else
	not_ok "deps.sh --check build with libmnl-dev missing: rc $rc: $out"
fi
done_testing
