#!/bin/bash
# dm-track builds, with W=1 and without one warning, against every kernel
# users run it on: the headers of each Debian kernel that apt offers here
# (scripts/distro-kernels.sh installs them; one that cannot be installed is
# a skip, by name) and the 6.12 test tree of `make kernel`. Each build is
# checked to be for the kernel it was built against (vermagic).
# timeout: 900
. "$(dirname "$0")/lib.sh"

# Build a copy of dm-track/ against KDIR; ok when it links, prints no
# warning and carries RELEASE in its vermagic.
build_against() {
	local name=$1 kdir=$2 release=$3 dir="$TMP/$4" log="$TMP/$4.log" vermagic

	cp -r "$TOP/dm-track" "$dir"
	make -C "$dir" clean-local >/dev/null 2>&1
	if ! nice make -k -C "$kdir" M="$dir" W=1 modules >"$log" 2>&1; then
		not_ok "dm-track builds against $name ($release)"
		grep -E 'error|warning' "$log" | head -n 20 | sed 's/^/# /'
		return
	fi
	if grep -qiE 'warning' "$log"; then
		not_ok "dm-track builds against $name ($release) without warnings"
		grep -iE 'warning' "$log" | head -n 20 | sed 's/^/# /'
		return
	fi
	vermagic=$(/sbin/modinfo -F vermagic "$dir/dm-track.ko" 2>/dev/null)
	if [ "${vermagic%% *}" != "$release" ]; then
		not_ok "dm-track builds against $name ($release): vermagic is '$vermagic'"
		return
	fi
	ok "dm-track builds against $name ($release) with W=1, no warnings"
}

n=0
while read -r verdict pkg a b; do
	n=$((n + 1))
	case "$verdict" in
	ok) build_against "Debian's $pkg" "$b" "$a" "distro$n" ;;
	skip) ok "dm-track builds against Debian's $pkg # SKIP $a $b" ;;
	esac
done < <("$TOP/scripts/distro-kernels.sh" headers 2>"$TMP/distro.err")
if [ $n = 0 ]; then
	not_ok "scripts/distro-kernels.sh named no kernel"
	sed 's/^/# /' "$TMP/distro.err"
fi

# The 6.12 tree the VM tests boot (patched, KASAN), if it is built.
if [ -f "$BUILD/kernel.env" ]; then
	# shellcheck disable=SC1091
	. "$BUILD/kernel.env"
	release=$(make -s -C "$KBUILD" kernelrelease 2>/dev/null)
	if [ -n "$release" ] && [ -f "$KBUILD/Module.symvers" ]; then
		build_against "the 6.12 test tree" "$KBUILD" "$release" testtree
	else
		ok "dm-track builds against the 6.12 test tree # SKIP $KBUILD is not built (make kernel)"
	fi
else
	ok "dm-track builds against the 6.12 test tree # SKIP build/kernel.env is missing (make kernel)"
fi
done_testing
