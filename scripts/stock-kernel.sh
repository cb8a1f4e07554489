#!/bin/bash
# Debian's stock kernel for the VM, with dm-track as a user gets it there.
#
# Installs linux-image-amd64 (bookworm's 6.1) with its headers and dkms
# (scripts/distro-kernels.sh image), then does what the README's "On a
# real machine" section says, for that kernel and not the running one:
#
#   dkms add ./dm-track
#   dkms build dm-track/VERSION -k RELEASE
#   dkms install dm-track/VERSION -k RELEASE
#
# and assembles build/initramfs-stock.cpio: the test VM's initramfs
# (build/initramfs from scripts/initramfs.sh) without the 6.12 test tree's
# dm-track.ko, plus kmod and the stock kernel's own modules that the tests
# need (virtio, dm-mod and targets, loop, ext4, xfs) with what they depend
# on, and the DKMS-installed dm-track. /init modprobes each module named in
# /etc/libtrack-modules. Writes build/stock.env (STOCK_RELEASE,
# STOCK_KIMAGE) for scripts/vm-run.sh; when the stock kernel cannot be
# installed, writes STOCK_SKIP with the reason instead and exits 0, so the
# stock boots are reported as skipped by name.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

env="$top/build/stock.env"
out="$top/build/initramfs-stock.cpio"
root="$top/build/initramfs-stock"
base="$top/build/initramfs"
rm -f "$env" "$out"
mkdir -p "$top/build"
[ -d "$base" ] || die "$base is missing; run scripts/initramfs.sh first"

if ! line=$("$top/scripts/distro-kernels.sh" image); then
	echo "STOCK_SKIP='linux-image-amd64 cannot be installed here'" >"$env"
	echo "stock-kernel: linux-image-amd64 cannot be installed; the stock boots will be skipped" >&2
	exit 0
fi
read -r release kimage moddir <<<"$line"

# DKMS, as the README says, for a kernel that is not the running one. The
# DKMS tree is the system's: one run at a time.
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$top/dm-track/dkms.conf")
[ -n "$version" ] || die "dm-track/dkms.conf has no PACKAGE_VERSION"
[ "$release" != "$(uname -r)" ] ||
	die "the stock kernel $release is the running one; this is meant to test dkms -k"
src="$(mktemp -d)/dm-track"
trap 'rm -rf "$(dirname "$src")"' EXIT
cp -r "$top/dm-track" "$src"
make -s -C "$src" clean-local
mkdir -p /var/lib/dkms
(
	flock 9
	# Test the tree, not "dkms status | grep -q": under pipefail grep's
	# early exit fails the pipe with SIGPIPE once dkms lists more than
	# one kernel, the removal is skipped and "dkms add" refuses. A run
	# killed after the rm below leaves an entry with no source, which
	# "dkms remove" leaves in place: clear what is left by hand.
	if [ -e "/var/lib/dkms/dm-track/$version" ]; then
		dkms remove "dm-track/$version" --all >/dev/null 2>&1 || :
		rm -rf "/var/lib/dkms/dm-track/$version"
		find /var/lib/dkms/dm-track -maxdepth 1 -xtype l -delete 2>/dev/null || :
	fi
	rm -rf "/usr/src/dm-track-$version"
	dkms add "$src" >/dev/null
	if ! dkms build "dm-track/$version" -k "$release" >"$top/build/dkms-build.log" 2>&1 ||
		! dkms install "dm-track/$version" -k "$release" >>"$top/build/dkms-build.log" 2>&1; then
		cat "$top/build/dkms-build.log" >&2
		find "/var/lib/dkms/dm-track/$version" -name make.log -exec tail -n 30 {} \; >&2
		die "dkms could not build or install dm-track for $release"
	fi
) 9>/var/lib/dkms/.libtrack.lock
ko=$(/sbin/modinfo -k "$release" -F filename dm-track) ||
	die "dkms install did not leave a dm-track module for $release"
echo "stock-kernel: dkms built and installed $ko"

# The modules the tests need, in load order; modprobe -S lists each with
# what it depends on.
modules="virtio_pci virtio_blk dm-mod dm-zero dm-delay dm-flakey
	dm-log-writes loop crc32c_generic crc32c-intel ext4 xfs dm-track"
rm -rf "$root"
cp -a "$base" "$root"
rm -f "$root"/lib/modules/extra/*.ko
for m in $modules; do
	/sbin/modprobe -S "$release" --show-depends "$m" ||
		die "the stock kernel $release has no module $m"
done | awk '$1 == "insmod" { print $2 }' | sort -u | while read -r f; do
	mkdir -p "$root$(dirname "$f")"
	cp "$f" "$root$f"
done
for f in modules.order modules.builtin modules.builtin.modinfo; do
	cp "$moddir/$f" "$root/lib/modules/$release/"
done
/sbin/depmod -b "$root" "$release"
echo "$modules" | xargs -n 1 >"$root/etc/libtrack-modules"

# kmod's modprobe (busybox's cannot resolve aliases such as crypto-crc32c,
# which the kernel asks /sbin/modprobe for), with its libraries.
cp /bin/kmod "$root/bin/kmod"
for t in modprobe depmod modinfo lsmod; do
	for d in bin sbin usr/bin usr/sbin; do
		[ -L "$root/$d/$t" ] && rm -f "$root/$d/$t"
	done
	ln -s /bin/kmod "$root/sbin/$t"
done
ldd /bin/kmod | awk '/=> \// { print $3 } /^\t\// { print $1 }' | while read -r lib; do
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done

(cd "$root" && find . | sort | cpio --quiet -o -H newc -R 0:0) >"$out"
cat >"$env" <<-EOF
	STOCK_RELEASE=$release
	STOCK_KIMAGE=$kimage
EOF
echo "stock-kernel: $out for $release ($(du -h "$out" | cut -f1))"
