#!/bin/sh
# Install the Debian packages one part of libtrack needs.
#
# Usage: scripts/deps.sh [--check] [GROUP...]
#   build  the libraries and tools: `make`, `make lib`, `make install`
#   test   the host tests: `make tests`, scripts/check.sh --host-only
#   vm     the test kernel, QEMU and the initramfs: `make kernel`, `make
#          check`, `make bench`, `make demo`
#   all    every group (the default)
#   --check  only report what is missing (exit 1 if anything is)
#
# As root the missing packages are installed with apt-get; otherwise the
# packages and the exact command to run are printed and the script fails.
set -eu

check=0
if [ "${1:-}" = "--check" ]; then
	check=1
	shift
fi
[ $# -gt 0 ] || set -- all

BUILD="build-essential pkg-config zlib1g-dev liburing-dev libmnl-dev
	libdevmapper-dev"
TEST="libcmocka-dev python3 e2fsprogs util-linux syncthing curl
	rsync python3-matplotlib clang libclang-rt-dev openssh-server
	openssh-client iproute2 bc strace"
VM="dmsetup xfsprogs kmod qemu-system-x86 busybox-static cpio
	linux-source-6.12 xz-utils flex bison bc libelf-dev libssl-dev dwarves
	ccache fio liburing-dev sqlite3"

PACKAGES=""
for g in "$@"; do
	case $g in
	build) PACKAGES="$PACKAGES $BUILD" ;;
	test) PACKAGES="$PACKAGES $BUILD $TEST" ;;
	vm) PACKAGES="$PACKAGES $BUILD $TEST $VM" ;;
	all) PACKAGES="$PACKAGES $BUILD $TEST $VM" ;;
	*)
		echo "deps.sh: unknown group '$g' (build, test, vm or all)" >&2
		exit 2
		;;
	esac
done

missing=""
for p in $PACKAGES; do
	case " $missing " in *" $p "*) continue ;; esac
	if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	exit 0
fi

if [ $check = 1 ]; then
	echo "missing packages ($*):$missing" >&2
	exit 1
fi

cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" -ne 0 ]; then
	echo "libtrack ($*) needs these Debian packages:$missing" >&2
	echo "Install them as root with:" >&2
	echo "  apt-get update && $cmd" >&2
	exit 1
fi

echo "deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing >&2
