#!/bin/bash
# Build the patched test kernel, cached outside the repository.
#
# Debian's linux-source-6.12 is unpacked once into $LIBTRACK_CACHE/src; each
# distinct (source version, kernel-patches/, selftests/config, this script)
# gets its own tree $LIBTRACK_CACHE/kernel/<key>/ with a hard-linked copy of
# the source, the series applied, and an O= build directory. A tree whose
# build finished is reused as is, so a warm run takes seconds; ccache makes a
# new key cheap when only a few files differ.
#
# Writes build/kernel.env (KSRC, KBUILD, KIMAGE, KHDR, KMODROOT, KVER) for the
# other scripts.
#
# --unpatched builds the same configuration with only the dm-track patch
# (0001, which the VM's init loads; it touches no write or notification
# path), for the benchmarks that compare the series against the kernel
# without it; it writes build/kernel-unpatched.env and leaves
# build/kernel.env alone. Only `make bench` asks for it.
#
# Environment:
#   LIBTRACK_CACHE   cache root (default ~/.cache/libtrack)
#   LIBTRACK_KASAN   0 builds without KASAN (for measuring its cost)
#   LIBTRACK_KDEBUG  0 builds without any of the debug checks (KASAN,
#                    lockdep, list and slab debugging, fault injection), as
#                    a distribution configures a kernel, for measuring what
#                    the series costs there (bench/write-path-insns.sh); the
#                    env file gets a "-nodebug" suffix, so the test
#                    kernel's stays
#   JOBS             parallel make jobs (default: number of CPUs)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cache=${LIBTRACK_CACHE:-$HOME/.cache/libtrack}
jobs=${JOBS:-$(nproc)}
tarball=/usr/src/linux-source-6.12.tar.xz
keep=5

[ -f "$tarball" ] ||
	die "$tarball is missing; run scripts/deps.sh (it installs linux-source-6.12)"
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.12)

unpatched=0
envfile=kernel.env
case "${1:-}" in
'') ;;
--unpatched) unpatched=1; envfile=kernel-unpatched.env ;;
*) echo "usage: scripts/kernel.sh [--unpatched]" >&2; exit 2 ;;
esac

# Kernel options on top of tinyconfig: the selftests' fragment, less the
# debug options the switches turn off.
fragment=$(mktemp)
trap 'rm -f "$fragment"' EXIT
cat "$top/selftests/config" >"$fragment"
off=
[ "${LIBTRACK_KASAN:-1}" = 0 ] && off=KASAN
if [ "${LIBTRACK_KDEBUG:-1}" = 0 ]; then
	off="KASAN PROVE_LOCKING DEBUG_ATOMIC_SLEEP DEBUG_LIST SLUB_DEBUG"
	off="$off FAULT_INJECTION FAILSLAB"
	envfile=${envfile%.env}-nodebug.env
fi
for o in $off; do
	sed -i "/^CONFIG_${o}[_=]/d" "$fragment"
	echo "# CONFIG_$o is not set" >>"$fragment"
done

# The patches, in series order.
series="$top/kernel-patches/series"
patches=()
if [ -f "$series" ]; then
	while read -r p _; do
		case "$p" in '' | '#'*) continue ;; esac
		[ -f "$top/kernel-patches/$p" ] ||
			die "kernel-patches/series names $p, which does not exist"
		patches+=("$top/kernel-patches/$p")
		[ "$unpatched" = 1 ] && break
	done <"$series"
fi

key=$({
	echo "linux-source-6.12 $srcver"
	[ "$unpatched" = 0 ] || echo unpatched
	cat "$fragment" "$0"
	for p in "${patches[@]}"; do
		basename "$p"
		cat "$p"
	done
} | sha256sum | cut -c1-16)

tree="$cache/kernel/$key"
ksrc="$tree/src"
kbuild="$tree/build"

write_env() {
	mkdir -p "$top/build"
	cat >"$top/build/$envfile" <<-EOF
		KEY=$key
		KSRC=$ksrc
		KBUILD=$kbuild
		KIMAGE=$kbuild/arch/x86/boot/bzImage
		KHDR=$kbuild/hdr/include
		KMODROOT=$kbuild/modroot
		KVER=$(cat "$kbuild/include/config/kernel.release")
	EOF
}

# One build per tree at a time (several checkouts share the cache).
mkdir -p "$cache/kernel"
exec 9>"$cache/kernel/.lock-$key"
flock 9

if [ -f "$tree/done" ]; then
	touch "$tree/done"
	write_env
	echo "kernel: cached $tree ($(cat "$kbuild/include/config/kernel.release"))"
	exit 0
fi

# The pristine source, unpacked once.
pristine=$(pristine_source)

# A hard-linked copy of the source with the series applied. GNU patch
# replaces the files it changes, so the pristine tree is never modified.
if [ ! -f "$tree/patched" ]; then
	rm -rf "$tree"
	mkdir -p "$tree"
	cp -al "$pristine" "$ksrc"
	for p in "${patches[@]}"; do
		echo "kernel: applying $(basename "$p")"
		if ! patch -d "$ksrc" -p1 --batch --forward --quiet <"$p"; then
			rm -rf "$tree"
			die "kernel-patches/$(basename "$p") does not apply to linux-source-6.12 $srcver"
		fi
	done
	touch "$tree/patched"
fi

# Configuration: tinyconfig, then the fragment; every option the fragment
# asks for must survive olddefconfig, or a dependency is missing.
mkdir -p "$kbuild"
kmake() {
	make -C "$ksrc" O="$kbuild" ARCH=x86_64 "$@"
}
kmake -s tinyconfig >/dev/null
"$ksrc/scripts/kconfig/merge_config.sh" -m -O "$kbuild" "$kbuild/.config" \
	"$fragment" >/dev/null
kmake -s olddefconfig >/dev/null
bad=0
while read -r line; do
	case "$line" in
	CONFIG_*=*)
		grep -qxF "$line" "$kbuild/.config" || {
			echo "kernel: $line from selftests/config did not stick" >&2
			bad=1
		}
		;;
	"# CONFIG_"*" is not set")
		opt=${line#\# }
		opt=${opt%% *}
		if grep -q "^$opt=" "$kbuild/.config"; then
			echo "kernel: $opt should be off but is on" >&2
			bad=1
		fi
		;;
	esac
done <"$fragment"
[ "$bad" = 0 ] || die "fix selftests/config (a dependency is probably missing)"

cc=gcc
if command -v ccache >/dev/null; then
	export CCACHE_DIR="$cache/ccache" CCACHE_BASEDIR="$tree" CCACHE_NOHASHDIR=1
	export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
	cc="ccache gcc"
fi

echo "kernel: building in $kbuild (log: $tree/build.log)"
start=$(date +%s)
if ! kmake -j"$jobs" CC="$cc" bzImage modules >"$tree/build.log" 2>&1; then
	grep -E 'error|Error' "$tree/build.log" | head -n 20 >&2
	tail -n 20 "$tree/build.log" >&2
	die "build failed; full log in $tree/build.log"
fi
rm -rf "$kbuild/hdr" "$kbuild/modroot"
kmake -s headers_install INSTALL_HDR_PATH="$kbuild/hdr" >/dev/null
kmake -s modules_install INSTALL_MOD_PATH="$kbuild/modroot" \
	INSTALL_MOD_STRIP=1 DEPMOD=/bin/true >/dev/null
echo "kernel: built in $(($(date +%s) - start)) s"
touch "$tree/done"
write_env

# Keep the most recently used trees only.
ls -1t "$cache"/kernel/*/done 2>/dev/null | tail -n +$((keep + 1)) |
	while read -r d; do
		echo "kernel: pruning $(dirname "$d")"
		rm -rf "$(dirname "$d")"
	done
exit 0
