# Shared helpers for the build scripts (sourced, not run).

top=$(cd "$(dirname "$0")/.." && pwd)

die() {
	echo "$(basename "$0" .sh): $*" >&2
	exit 1
}

# Load build/kernel.env written by scripts/kernel.sh.
load_kernel_env() {
	[ -f "$top/build/kernel.env" ] ||
		die "build/kernel.env is missing; run 'make kernel' first"
	# shellcheck disable=SC1091
	. "$top/build/kernel.env"
	[ -f "$KIMAGE" ] || die "$KIMAGE is missing; run 'make kernel' again"
}

# The pristine linux-source-6.12 tree, unpacked once into the cache; prints
# its path. Several checkouts may share the cache, hence the lock.
pristine_source() {
	local cache=${LIBTRACK_CACHE:-$HOME/.cache/libtrack}
	local tarball=/usr/src/linux-source-6.12.tar.xz
	local ver dir

	[ -f "$tarball" ] ||
		die "$tarball is missing; run scripts/deps.sh (it installs linux-source-6.12)"
	ver=$(dpkg-query -W -f='${Version}' linux-source-6.12)
	dir="$cache/src/linux-source-6.12-$ver"
	mkdir -p "$cache/src"
	(
		flock 8
		if [ ! -f "$dir/.unpacked" ]; then
			echo "kernel: unpacking $tarball" >&2
			rm -rf "$dir" "$dir.tmp"
			mkdir -p "$dir.tmp"
			tar -xf "$tarball" -C "$dir.tmp" --strip-components=1
			touch "$dir.tmp/.unpacked"
			mv "$dir.tmp" "$dir"
		fi
	) 8>"$cache/src/.lock"
	echo "$dir"
}

# Copy host programs (paths, or names found in PATH) into the initramfs tree
# ROOT at the same paths, with the shared libraries they need. A program
# replaces busybox's applet of the same name.
add_host_progs() {
	local root=$1 p q d lib
	shift
	for p in "$@"; do
		case "$p" in
		/*) ;;
		*)
			q=$(command -v "$p") || die "no program '$p' on this machine"
			p=$q
			;;
		esac
		[ -x "$p" ] || die "$p is missing; run scripts/deps.sh"
		for d in bin sbin usr/bin usr/sbin; do
			[ -L "$root/$d/$(basename "$p")" ] &&
				rm -f "$root/$d/$(basename "$p")"
		done
		mkdir -p "$root$(dirname "$p")"
		cp "$p" "$root$p"
		ldd "$p" 2>/dev/null |
			awk '/=> \// { print $3 } /^\t\// { print $1 }' |
			while read -r lib; do
				mkdir -p "$root$(dirname "$lib")"
				[ -e "$root$lib" ] || cp -L "$lib" "$root$lib"
			done
	done
}
