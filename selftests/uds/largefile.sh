#!/bin/sh
# A small change to a large file, pushed without the kernel's write
# ranges (fallback mode; in ranges mode only the range is read anyway):
# uds-plus reads the SAVINGBOX copy once and, of SYNCFOLDER's copy, only
# the blocks that changed, not both copies whole. The folders stay equal
# byte for byte after every push.
UDS_T=${UDS_T:-0.3}
UDS_F=${UDS_F:-1.5}
. "$(dirname "$0")/lib.sh"
uds_require

MB=${UDS_LARGE_MB:-32}
size=$((MB << 20))
head -c "$size" /dev/urandom >"$S/disk.img"
uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
uds_wait_synced 120 || not_ok "the first sync"

# Pushes of one 4 KiB write each: none reads both copies, not even the
# first (the start-up copy kept the hashes of what it wrote; after a
# restart of uds-plus the first push would read both).
worst=0
i=0
while [ $i -lt 4 ]; do
	uds_refresh
	r0=$(uds_status bytes_read)
	p0=$(uds_status pushes)
	write_at "$S/disk.img" $((($(rnd $((size / 4096))) * 4096))) 4096
	uds_wait_synced 60 || not_ok "push $i: the folders are equal"
	uds_refresh
	r=$(($(uds_status bytes_read) - r0))
	p=$(($(uds_status pushes) - p0))
	diag "push $i: $p pushes, $r bytes read for a $size-byte file"
	[ $r -gt $worst ] && worst=$r
	i=$((i + 1))
done
if [ $UDS_WANT_RANGES = 1 ]; then
	check_between "ranges mode: a 4 KiB change reads about 4 KiB" "$worst" 0 $((64 << 10))
else
	check_between "a 4 KiB change reads the file once, not twice (bytes)" \
		"$worst" "$size" $((size + size / 8))
fi
check "the folders are equal byte for byte" trees_equal
# The sums follow the file when it shrinks and grows.
# (dd with a seek and no input cuts the file there, in any shell)
dd if=/dev/null of="$S/disk.img" bs=1 seek=$((size - 5000)) 2>/dev/null
uds_wait_synced 60 && ok "cut short: the folders are equal" ||
	not_ok "cut short: the folders are equal"
head -c 10000 /dev/urandom >>"$S/disk.img"
write_at "$S/disk.img" 100 10
uds_wait_synced 60 && ok "grown and changed: the folders are equal" ||
	not_ok "grown and changed: the folders are equal"
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
