#!/bin/sh
# make demo, first: which kernel is up and what it can do.
echo "== the patched kernel"
echo "kernel: $(uname -r) ($(uname -v))"
echo "device-mapper targets:"
dmsetup targets | sed 's/^/  /'
if dmsetup targets | grep -q '^track '; then
	echo "dm-track: loaded (out-of-tree module, built from dm-track/)"
else
	echo "dm-track: NOT available"
fi
mode=$(inotify-range --mode 2>/dev/null)
case "$mode" in
fanotify) echo "fanotify: FAN_REPORT_RANGE supported: FAN_MODIFY events carry a range record (libtrack uses it)" ;;
ranges) echo "inotify: IN_REPORT_RANGE supported: IN_MODIFY events carry offset and length" ;;
*) echo "inotify: no IN_REPORT_RANGE (plain inotify: whole-file events)" ;;
esac
echo "debug checks: $(grep -c . /proc/lockdep_stats >/dev/null 2>&1 && echo lockdep) $(dmesg | grep -q 'KernelAddressSanitizer initialized' && echo KASAN)"
echo
