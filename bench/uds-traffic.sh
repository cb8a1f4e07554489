#!/bin/bash
# The UDS paper's traffic figures (sections 3-5) through uds-plus: the
# paper's short-update workloads (bench/uds_workload.c) written into
# SAVINGBOX, pushed by uds-plus as shipped (the generic profile: the
# paper's t 5 s, c 250 KB, f 30 s, and --lone-delay's early push of a
# change after a long quiet), by the paper's policy alone (--lone-delay 0)
# and with a push on every update (t 0), and the traffic a cloud
# client would send for those pushes under the paper's Table 1 cost
# model: about 30 KB of index-server metadata per sync, plus the
# compressed delta (the bytes uds-plus wrote into SYNCFOLDER, times what
# gzip -1 makes of the file's content). Next to it, the paper's Dropbox
# and UDS figures for the same workloads.
#
# Time is compressed by SPEEDUP per workload: the writer's gaps and
# uds-plus's t, f and --lone-delay are all divided by it, and c is not,
# so every gap falls on the same side of t and f as at the real pace and
# the pushes are those of the real-time run, as long as uds-plus reacts
# within a small part of the shortest scaled t. The table prints how late
# the writer ever was, and UDS_TRAFFIC_SPEEDUP_APPENDS=5 (etc.) reruns a
# row slower to check that the pushes do not move.
#
#   bench/uds-traffic.sh          (after make; about 17 minutes)
#   UDS_TRAFFIC_ROWS="appends download" bench/uds-traffic.sh
#
# Environment: UDS_TRAFFIC_ROWS ("appends download collab log"),
# UDS_TRAFFIC_POLICIES ("default tcf every-update"),
# UDS_TRAFFIC_SPEEDUP_<ROW> (APPENDS 20, DOWNLOAD 10, COLLAB 30, LOG 30),
# UDS_TRAFFIC_AMOUNT_<ROW> (the workload's BYTES or SECONDS: 1024,
# 5000000, 3600, 3600: one hour of the log, where the paper replayed
# four; its traffic per hour is what compares),
# UDS_TRAFFIC_COLLAB_FILE (1000000 bytes), UDS_TRAFFIC_META (30720 bytes
# per sync), UDS_TRAFFIC_SEED (1).
#
# Results: docs/benchmarks-uds.md.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
PATH=$top/build/bin:$PATH
ROWS=${UDS_TRAFFIC_ROWS:-appends download collab log}
POLICIES=${UDS_TRAFFIC_POLICIES:-default tcf every-update}
META=${UDS_TRAFFIC_META:-30720}
SEED=${UDS_TRAFFIC_SEED:-1}
COLLAB_FILE=${UDS_TRAFFIC_COLLAB_FILE:-1000000}

[ -x "$top/build/bin/uds-plus" ] || { echo "run make first" >&2; exit 1; }
command -v gzip >/dev/null || { echo "gzip is missing" >&2; exit 1; }
# The uds-plus test helpers: $W (a scratch directory, removed at exit),
# $S and $D, uds_start, uds_wait_synced, uds_status, uds_stop.
. "$top/selftests/uds/lib.sh"
UDS_TREECMP=$W/treecmp
cc -O2 -Wall -o "$UDS_TREECMP" "$top/selftests/uds/treecmp.c" || exit 1
cc -O2 -Wall -o "$W/workload" "$top/bench/uds_workload.c" -lm || exit 1
uds_require

upper() { tr '[:lower:]' '[:upper:]' <<<"$1"; }
# The real-time default for a row's knob.
speedup() {
	local v="UDS_TRAFFIC_SPEEDUP_$(upper "$1")"
	local d
	case $1 in appends) d=20 ;; download) d=10 ;; collab | log) d=30 ;; esac
	echo "${!v:-$d}"
}
amount() {
	local v="UDS_TRAFFIC_AMOUNT_$(upper "$1")"
	local d
	case $1 in
	appends) d=1024 ;; download) d=5000000 ;; collab) d=3600 ;;
	log) d=3600 ;;
	esac
	echo "${!v:-$d}"
}
# The paper's figures for the row: Dropbox's traffic, UDS's.
paper() {
	case $1 in
	appends) echo "1.2-2 MB (Fig. 4, 5)|-" ;;
	download) echo "75 MB (Fig. 16)|6.2 MB (Fig. 21)" ;;
	collab) echo "~130 MB, both users (4.2)|-" ;;
	log) echo "21x the log (Fig. 15)|slightly more than the log (Fig. 22)" ;;
	esac
}
ms() {	# $1 seconds / $2, in whole milliseconds
	awk -v s="$1" -v k="$2" 'BEGIN { printf "%d", s * 1000 / k }'
}
human() {
	awk -v b="$1" 'BEGIN {
		if (b >= 1e6) printf "%.2f MB", b / 1e6
		else if (b >= 1e3) printf "%.1f KB", b / 1e3
		else printf "%d B", b }'
}

# run ROW POLICY: one workload through one uds-plus; prints a table row
run() {
	local row=$1 policy=$2 k lone out file
	k=$(speedup "$row")
	rm -rf "$S" "$D" "$W/state"
	mkdir -p "$S" "$D" "$W/state"
	file=$S/$row.dat
	if [ "$row" = collab ]; then
		# the shared document, already in the cloud before the edits
		"$W/workload" ascii "$file" "$COLLAB_FILE" "$SEED" || return 1
		cp -p "$file" "$D/"
	fi
	case $policy in
	default | tcf) UDS_T=$(ms 5 "$k")ms ;;
	every-update) UDS_T=0 ;;
	*) echo "unknown policy $policy" >&2; return 1 ;;
	esac
	UDS_C=250KB
	UDS_F=$(ms 30 "$k")ms
	UDS_PULL=$(ms 1 "$k")ms
	lone=$(ms 0.5 "$k")
	[ "$policy" = tcf ] && lone=0
	uds_start --no-fsync --log-level info --lone-delay "${lone}ms" ||
		{ echo "uds-plus did not start" >&2; return 1; }
	[ "$(uds_status pushes)" = 0 ] ||
		echo "# $row/$policy: $(uds_status pushes) pushes at start" >&2
	out=$("$W/workload" "$row" "$file" "$k" "$SEED" "$(amount "$row")") ||
		return 1
	# the last push: the timer's, or at once with t 0
	uds_wait_synced 300 >&2 ||
		{ echo "# $row/$policy: never synced" >&2; return 1; }
	uds_stop
	set -- $out
	local updates=$2 size=$6 late=$8
	local pushes bytes ratio delta traffic tm lone_n
	pushes=$(uds_status pushes)
	bytes=$(uds_status bytes_pushed)
	ratio=$(awk -v c="$(gzip -1 -c "$file" | wc -c)" -v n="$size" \
		'BEGIN { r = c / n; printf "%.3f", (r > 1 ? 1 : r) }')
	delta=$(awk -v b="$bytes" -v r="$ratio" 'BEGIN { printf "%d", b * r }')
	traffic=$((pushes * META + delta))
	IFS='|' read -r pdrop puds <<<"$(paper "$row")"
	lone_n=$(uds_status pushes_lone)
	tm=$(($(uds_status pushes_timer) - lone_n))
	printf '| %s | %s | %s | %s | %s | %s (%s/%s/%s/%s) | %s | %s | %s | %s | %s | %s | %s |\n' \
		"$row" "$policy" "$k" "$late" "$updates" "$pushes" "$tm" \
		"$(uds_status pushes_counter)" "$(uds_status pushes_failsafe)" \
		"$lone_n" "$(human "$size")" "$(human "$bytes")" "$ratio" \
		"$(human "$traffic")" \
		"$(awk -v a="$traffic" -v b="$size" 'BEGIN { printf "%.1fx", a / b }')" \
		"$pdrop" "$puds"
}

echo "# uds-plus traffic under the paper's cost model: $META bytes of"
echo "# metadata per sync plus the compressed delta; fallback mode, kernel"
echo "# $(uname -r), $(nproc) CPUs; seed $SEED; k: time compressed k times"
echo "# (gaps, t, f and --lone-delay divided by k; c as is); late: the"
echo "# writer's worst lateness against its schedule, in ms; pushes: all"
echo "# (timer/counter/fail-safe/lone); gzip: gzip -1's ratio on the file,"
echo "# applied to the bytes pushed"
echo
echo "| workload | policy | k | late ms | updates | pushes (t/c/f/l) | file | bytes pushed | gzip | traffic (model) | traffic / file | paper: Dropbox | paper: UDS |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
status=0
for row in $ROWS; do
	for p in $POLICIES; do
		run "$row" "$p" || { echo "# $row/$p failed" >&2; status=1; }
	done
done
exit $status
