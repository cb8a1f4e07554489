#!/bin/sh
# A lone change in a large file: the cloud client alone hashes the whole
# file after a change (Syncthing, Dropbox), and a change that comes while
# it hashes makes it start again, so alone it makes one sync of both.
# uds-plus's lone push waits --lone-delay plus the time the client would
# take to hash the file (at 64 MiB/s): a second write 1 s after the first
# into a 64 MiB file is batched with it (the old rule pushed the first
# alone after 500 ms, one sync more than the client alone: the 256 MiB
# row of docs/benchmarks-uds.md), and a single write still goes out
# before t. Host only (a 64 MiB file in the VM is slow under TCG).
UDS_T=${UDS_T:-4}
UDS_F=${UDS_F:-20}
. "$(dirname "$0")/lib.sh"
uds_require

MB=${UDS_LARGE_MB:-64}
size=$((MB << 20))
head -c "$size" /dev/urandom >"$S/disk.img"
uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
uds_wait_synced 120 || not_ok "the first sync"
sleep $((UDS_T * 2))

# Two writes 1 s apart after 2 t of quiet: one push, none of them lone.
uds_refresh
p0=$(uds_status pushes)
l0=$(uds_status pushes_lone)
write_at "$S/disk.img" 4096 4096
sleep 1
write_at "$S/disk.img" $((size / 2)) 4096
uds_wait_synced 60 || not_ok "the two writes are synced"
uds_refresh
check "two writes 1 s apart into a $MB MiB file are one push" \
	[ $(($(uds_status pushes) - p0)) = 1 ]
check "and not a lone one" [ "$(uds_status pushes_lone)" = "$l0" ]

# One write after 2 t of quiet: lone, after 0.5 s + 1 s of hashing, not t.
sleep $((UDS_T * 2))
uds_refresh
p0=$(uds_status pushes)
r0=$(uds_status pushes_lone)
t0=$(now_ms)
write_at "$S/disk.img" $((size - 8192)) 4096
while [ "$(uds_status pushes)" = "$p0" ] && [ $(($(now_ms) - t0)) -lt 10000 ]; do
	sleep 0.05
done
lat=$(($(now_ms) - t0))
check_between "a lone write waits the hash time, and less than t (ms)" \
	"$lat" 1300 $((UDS_T_MS - 300))
uds_refresh
check "counted as lone" [ "$(uds_status pushes_lone)" = $((r0 + 1)) ]
uds_wait_synced 60 || not_ok "the lone write is synced"
check "the folders are equal byte for byte" trees_equal
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
