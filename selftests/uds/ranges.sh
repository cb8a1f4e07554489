#!/bin/sh
# Small writes into a large file: with ranges (the UDS+ kernel) uds-plus
# reads only what changed, never the whole file, and writes exactly the
# changed bytes; without, it compares the file with the SYNCFOLDER copy and
# writes only the 4 KiB blocks that differ.
UDS_T=${UDS_T:-0.3}
UDS_F=${UDS_F:-1.5}
. "$(dirname "$0")/lib.sh"
uds_require

size=8388608
head -c $size /dev/urandom >"$S/disk.img"
uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
uds_wait_synced || not_ok "the first sync"
read0=$(uds_status bytes_read)
pushed0=$(uds_status bytes_pushed)
i=0
while [ $i -lt 50 ]; do
	write_at "$S/disk.img" "$(rnd $((size - 100)))" 100
	i=$((i + 1))
done
if uds_wait_synced; then ok "SYNCFOLDER equals SAVINGBOX"; else
	not_ok "SYNCFOLDER equals SAVINGBOX"; fi
read=$(($(uds_status bytes_read) - read0))
pushed=$(($(uds_status bytes_pushed) - pushed0))
diag "50 writes of 100 bytes into $size bytes: $read bytes read," \
	"$pushed written into SYNCFOLDER in $(uds_status pushes) pushes"
if [ "$(uds_status mode)" = ranges ]; then
	check "ranges: only the changed bytes were written" [ "$pushed" -le 5000 ]
	check "ranges: reads are proportional to the change, not the file" \
		[ "$read" -le 100000 ]
else
	# A block delta writes from the first to the last differing byte of
	# each run of differing 4 KiB blocks.
	check "fallback: at most the changed blocks were written" \
		[ "$pushed" -le $((50 * 2 * 4096)) ]
fi
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
