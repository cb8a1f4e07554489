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
