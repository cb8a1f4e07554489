#!/bin/sh
# The UDS paper's CPU benchmark (section 6) through uds-plus: 2 KB of
# random bytes appended to a file in SAVINGBOX every 200 ms until it holds
# 10 MB, here 100 times faster (every 2 ms; the push counts do not change:
# the counter c = 250 KB fires every ~125 appends either way). Reports the
# CPU seconds uds-plus used, its pushes and bytes, for the batching policy
# (t = 5 s, c = 250 KB, f = 30 s) and for pushing on every update (t = 0),
# in ranges mode when the kernel has it and always in fallback mode.
#
#   cpu-bench.sh            (env: UDS_BENCH_TOTAL, _CHUNK, _INTERVAL_US)
#
# Used by bench/uds-cpu.sh on the host and by `make demo` in the VM.
. "$(dirname "$0")/lib.sh"
uds_require

total=${UDS_BENCH_TOTAL:-10485760}
chunk=${UDS_BENCH_CHUNK:-2048}
interval=${UDS_BENCH_INTERVAL_US:-2000}
appender=${UDS_APPENDER:-$UDS_DIR/appender}
[ -x "$appender" ] || skip_all "appender is not built"

modes=fallback
case $(inotify-range --mode 2>/dev/null) in
fanotify | ranges) modes="ranges fallback" ;;
esac

run() {		# MODE POLICY OPTIONS...
	_mode=$1 _policy=$2
	shift 2
	rm -rf "$S" "$D" "$W/state"
	mkdir -p "$S" "$D" "$W/state"
	[ "$_mode" = fallback ] && set -- "$@" --no-ranges
	uds_start --no-fsync "$@" || { diag "uds-plus did not start"; return; }
	_t0=$(now_ms)
	"$appender" "$S/bench.dat" "$chunk" "$interval" "$total"
	_t1=$(now_ms)
	uds_wait_synced 600 >/dev/null || diag "not synced: $_mode $_policy"
	uds_stop
	printf '%-9s %-13s %7s %6s %5s %7s %8s %12s %12s %7s %6s\n' \
		"$(uds_status mode)" "$_policy" "$(uds_status updates)" \
		"$(uds_status pushes)" "$(uds_status pushes_timer)" \
		"$(uds_status pushes_counter)" "$(uds_status pushes_failsafe)" \
		"$(uds_status bytes_pushed)" "$(uds_status bytes_read)" \
		"$(uds_status cpu_seconds)" \
		"$(awk -v a="$_t0" -v b="$_t1" 'BEGIN { printf "%.1f", (b - a) / 1000 }')"
}

echo "# uds-plus CPU benchmark: $chunk bytes every $interval us up to" \
	"$total bytes (the paper: 2 KB every 200 ms up to 10 MB)"
echo "# kernel $(uname -r), $(nproc) CPUs; --no-fsync; cpu_s is uds-plus's" \
	"user+system time (getrusage), writer excluded"
printf '%-9s %-13s %7s %6s %5s %7s %8s %12s %12s %7s %6s\n' mode policy \
	updates pushes timer counter failsafe bytes_pushed bytes_read cpu_s \
	wall_s
for m in $modes; do
	UDS_T=5 UDS_C=250KB UDS_F=30 run "$m" "t5s,c250KB,f30s"
	UDS_T=0 UDS_C=250KB UDS_F=30 run "$m" "every-update"
done
