#!/bin/sh
# Install the Debian packages libtrack needs to build and test.
#
# Usage: scripts/deps.sh [--check]
#   --check  only report what is missing (exit 1 if anything is)
#
# As root the missing packages are installed with apt-get; otherwise the
# exact command to run is printed and the script fails.
set -eu

PACKAGES="
	build-essential pkg-config
	libmnl-dev zlib1g-dev libcmocka-dev libdevmapper-dev
	dmsetup e2fsprogs xfsprogs util-linux kmod
	qemu-system-x86 busybox-static cpio
	linux-source-6.12 xz-utils
	flex bison bc libelf-dev libssl-dev dwarves
	ccache rsync fio python3 liburing-dev
	clang libclang-rt-dev openssh-server openssh-client iproute2 bc
"

missing=""
for p in $PACKAGES; do
	if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	exit 0
fi

if [ "${1:-}" = "--check" ]; then
	echo "missing packages:$missing" >&2
	exit 1
fi

cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" -ne 0 ]; then
	echo "libtrack needs these Debian packages:$missing" >&2
	echo "Install them as root with:" >&2
	echo "  apt-get update && $cmd" >&2
	exit 1
fi

echo "deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing >&2
