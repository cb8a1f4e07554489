#!/bin/sh
# The delay bound: the far side has a batch no later than with the client
# alone, within t. In fallback mode a push reads the changed file, which
# for a large one takes long enough to matter: started at the timer, a
# push of a 4 KiB write into a 256 MiB file ended up to 0.25 s past the
# bound (bench/uds-syncthing.sh). So a push starts early by its expected
# cost: the file's size at the rate this process's last push that
# compared a large file read at (64 MiB/s before there was one), counted
# for at most t/2 (a generic client), so that changes closer than that
# stay one push. This checks the decision uds-plus records in
# its status file, not a wall-clock time: the rate it measured, the cost
# it expected for the file, the start it planned (t - cost), and that the
# push started at or after the plan and before t. Host only (fallback
# mode; in ranges mode a push reads only the written ranges).
UDS_T=${UDS_T:-4}
UDS_F=${UDS_F:-20}
. "$(dirname "$0")/lib.sh"
uds_require

MB=${UDS_LARGE_MB:-128}
size=$((MB << 20))
head -c "$size" /dev/urandom >"$S/disk.img"
uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
[ "$(uds_status mode)" = fallback ] ||
	skip_all "uds-plus runs in ranges mode here (the push reads only the ranges)"
uds_wait_synced 120 || not_ok "the first sync"
uds_refresh
check "a copy does not set the rate (it does not hash)" \
	[ "$(uds_status push_rate)" = 0 ]

# A burst of two 4 KiB writes 0.4 s apart (not a lone change), then
# quiet; check the decision for its push against RATE (bytes/s).
burst() {
	_rate=$1 _what=$2
	sleep $((UDS_T * 2))
	uds_refresh
	_p0=$(uds_status pushes)
	write_at "$S/disk.img" $(rnd $((size - 4096))) 4096
	sleep 0.4
	write_at "$S/disk.img" $(rnd $((size - 4096))) 4096
	uds_wait_synced 60 || not_ok "the burst is synced"
	uds_refresh
	check "the burst is one push" [ $(($(uds_status pushes) - _p0)) = 1 ]
	_cost=$(uds_status last_push_cost_ms)
	_plan=$(uds_status last_push_plan_ms)
	_quiet=$(uds_status last_push_quiet_ms)
	diag "push: cost $_cost ms expected, planned $_plan ms after the" \
		"last write, started after $_quiet ms, took" \
		"$(uds_status last_push_took_ms) ms"
	_exp=$((size / (_rate / 1000)))
	check "the expected cost is the file's size at $_what ($_cost = $_exp)" \
		[ "${_cost:-x}" = "$_exp" ]
	_early=$((UDS_T_MS / 2))
	[ "$_exp" -lt $_early ] && _early=$_exp
	check "the push is planned t less the cost after the last write ($_plan = $((UDS_T_MS - _early)))" \
		[ "${_plan:-x}" = $((UDS_T_MS - _early)) ]
	check "it started no earlier than planned ($_quiet >= $_plan)" \
		[ "${_quiet:-0}" -ge "${_plan:-1}" ]
	# Where the push starts a second or more early, it did not wait for
	# the timer, whatever the load (the old code did, always).
	[ "$_early" -lt 1000 ] ||
		check "and before the timer ($_quiet < $UDS_T_MS)" \
			[ "${_quiet:-$UDS_T_MS}" -lt "$UDS_T_MS" ]
}

burst $((64 << 20)) "64 MiB/s (no push has compared yet)"
uds_refresh
rate=$(uds_status push_rate)
diag "that push compared the $MB MiB file at $rate bytes/s"
check "the rate of a push that compared is measured" [ "${rate:-0}" -gt 1000 ]
burst "${rate:-1000}" "the measured rate"
check "the folders are equal byte for byte" trees_equal
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
