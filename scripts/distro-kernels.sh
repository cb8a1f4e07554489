#!/bin/bash
# The Debian kernels dm-track is built and tested on, as users install them.
#
# Usage: scripts/distro-kernels.sh headers
#        scripts/distro-kernels.sh image
#
# headers  installs the headers of every kernel in LIBTRACK_DISTRO_HEADERS
#          (default: bookworm's linux-headers-amd64, its 6.1 kernel, and
#          linux-headers-6.12-amd64, the newest kernel bookworm offers) and
#          prints one line per package:
#              ok PACKAGE RELEASE KDIR
#              skip PACKAGE REASON
# image    installs LIBTRACK_STOCK_IMAGE (default: linux-image-amd64,
#          bookworm's stock 6.1 kernel, with its headers for DKMS and
#          dkms itself) and prints:
#              RELEASE VMLINUZ MODULES_DIR
#
# Packages are installed with apt-get as root; a package apt cannot install
# is a skip, named, never a failure of this script. The list of what apt
# offers here is `apt-cache search linux-headers`.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

headers_pkgs=${LIBTRACK_DISTRO_HEADERS:-linux-headers-amd64 linux-headers-6.12-amd64}
image_pkg=${LIBTRACK_STOCK_IMAGE:-linux-image-amd64}

installed() {
	dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

# Install PACKAGES unless they are; apt's complaint goes to stderr.
install_pkgs() {
	local p missing=()

	for p in "$@"; do
		installed "$p" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "distro-kernels: ${missing[*]} not installed and not root" >&2
		return 1
	fi
	echo "distro-kernels: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	# A package list older than the archive names files it no longer has.
	if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; then
		apt-get update -q >&2 &&
			apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
	fi
}

# The versioned package a meta-package (linux-headers-amd64) stands for,
# followed down to the one that has files; the package itself otherwise.
resolve() {
	local p=$1 kind flavour dep

	case "$p" in
	linux-headers-*) kind=linux-headers ;;
	*) kind=linux-image ;;
	esac
	flavour=${p##*-}		# amd64
	for _ in 1 2 3; do
		dep=$(dpkg-query -W -f='${Depends}' "$p" 2>/dev/null |
			sed 's/[,|]/\n/g' | sed 's/^ *//; s/ .*//' |
			grep -E "^$kind-[0-9][^ ]*-$flavour\$" | head -n 1)
		[ -n "$dep" ] || break
		p=$dep
	done
	echo "$p"
}

case "${1:-}" in
headers)
	for pkg in $headers_pkgs; do
		if ! install_pkgs "$pkg"; then
			echo "skip $pkg apt-get cannot install it here"
			continue
		fi
		real=$(resolve "$pkg")
		release=${real#linux-headers-}
		kdir=/usr/src/$real
		if [ ! -f "$kdir/Makefile" ]; then
			echo "skip $pkg $kdir has no Makefile"
			continue
		fi
		echo "ok $pkg $release $kdir"
	done
	;;
image)
	install_pkgs "$image_pkg" dkms ||
		die "cannot install $image_pkg and dkms; run 'apt-get update' and try again"
	real=$(resolve "$image_pkg")
	release=${real#linux-image-}
	headers=linux-headers-$release
	install_pkgs "$headers" ||
		die "cannot install $headers, which dkms needs to build for $release"
	[ -f "/boot/vmlinuz-$release" ] || die "/boot/vmlinuz-$release is missing; reinstall $real"
	[ -d "/lib/modules/$release/kernel" ] || die "/lib/modules/$release has no modules; reinstall $real"
	echo "$release /boot/vmlinuz-$release /lib/modules/$release"
	;;
*)
	echo "usage: distro-kernels.sh headers | image" >&2
	exit 2
	;;
esac
