#!/bin/sh
# On the stock kernel: dm-track is the module DKMS built and installed for
# this kernel, `modprobe dm-track` loads it, dm knows the target, and the
# kernel has no inotify write ranges (so those tests must skip and uds-plus
# must run in its fallback mode). KTAP; exit 4 (KSFT_SKIP) on the test
# kernel, where none of this applies.
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n $*"; }
not_ok() { n=$((n + 1)); fail=1; echo "not ok $n $*"; }

release=$(uname -r)
if [ ! -f /etc/libtrack-modules ]; then
	echo "1..0 # SKIP not the stock kernel ($release)"
	exit 4
fi
echo "1..5"
file=$(/sbin/modinfo -F filename dm-track 2>&1)
case "$file" in
/lib/modules/"$release"/updates/dkms/dm-track.ko*) ok "modinfo dm-track: $file" ;;
*) not_ok "modinfo dm-track: '$file', not DKMS's module for $release" ;;
esac
vermagic=$(/sbin/modinfo -F vermagic dm-track 2>&1)
if [ "${vermagic%% *}" = "$release" ]; then
	ok "dm-track was built for $release"
else
	not_ok "dm-track vermagic '$vermagic' is not $release"
fi
if /sbin/modprobe dm-track && [ -d /sys/module/dm_track ]; then
	ok "modprobe dm-track"
else
	not_ok "modprobe dm-track"
fi
if dmsetup targets | grep -q '^track '; then
	ok "dmsetup targets lists track ($(dmsetup targets | awk '$1 == "track" { print $2 }'))"
else
	not_ok "dmsetup targets does not list track"
	dmsetup targets | sed 's/^/# /'
fi
mode=$(inotify-range --mode 2>&1)
if [ "$mode" = plain ]; then
	ok "inotify-range --mode: plain (uds-plus falls back)"
else
	not_ok "inotify-range --mode: '$mode' on a stock kernel"
fi
exit $fail
