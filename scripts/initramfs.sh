#!/bin/bash
# Assemble the test VM's initramfs: busybox, dmsetup, e2fsprogs, mkfs.xfs
# and sqlite3 with their libraries, libtrack's tools, the selftests, the
# dm-track module, and /init.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
load_kernel_env

out="$top/build/initramfs.cpio"
root="$top/build/initramfs"
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,lib,lib64,etc,root}
mkdir -p "$root"/{proc,sys,dev,tmp,run,mnt,selftests/bin,lib/modules/extra}

# busybox with every applet as a link
cp /bin/busybox "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list-full); do
	[ -e "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
done

# Programs from the host the tests use, with their libraries; more from
# LIBTRACK_VM_PROGS (names or paths, space-separated).
# shellcheck disable=SC2086
add_host_progs "$root" /sbin/dmsetup /sbin/mke2fs /sbin/e2fsck /sbin/mkfs.xfs \
	/sbin/blkdiscard /usr/bin/cmp /usr/bin/setpriv /usr/bin/sqlite3 \
	${LIBTRACK_VM_PROGS:-}
ln -sf mke2fs "$root/sbin/mkfs.ext4"

# libtrack's tools and the selftests
cp "$top"/build/bin/* "$root/usr/local/bin/" 2>/dev/null || true
cp -r "$top"/build/selftests/. "$root/selftests/"
cp "$top"/selftests/harness/*.sh "$root/selftests/bin/" 2>/dev/null || true
if [ -f "$top/dm-track/dm-track.ko" ]; then
	cp "$top/dm-track/dm-track.ko" "$root/lib/modules/extra/"
fi

# Shared libraries of every ELF file, and the dynamic loader.
find "$root" -type f -perm -u+x | while read -r f; do
	ldd "$f" 2>/dev/null | awk '/=> \// { print $3 } /^\t\// { print $1 }'  || true
done | sort -u | while read -r lib; do
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done

cat >"$root/etc/passwd" <<-EOF
	root:x:0:0:root:/root:/bin/sh
	nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$root/etc/group" <<-EOF
	root:x:0:
	nogroup:x:65534:
EOF
install -m 755 "$top/selftests/vm/init" "$root/init"

(cd "$root" && find . | sort | cpio --quiet -o -H newc -R 0:0) >"$out"
echo "initramfs: $out ($(du -h "$out" | cut -f1))"
