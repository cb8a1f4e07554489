#!/bin/bash
# dsync against what users would run instead, on host files, side by side
# (the dsync paper's section 4, and issue 17's goals). Writes raw CSV to
# RESULTS; bench/report.py turns it into docs/benchmarks.md.
#
# Data: SRC, SIZE_MIB of seeded random 4 KiB blocks (bench/bdata.c), and
# DST, a replica equal to it. For each dirty pattern, the pattern's blocks
# of SRC are rewritten with new random data, and DST is brought up to date
# by each method in turn:
#
#   dsync      dmextract --dirty LIST --device SRC | dmmerge DST
#              (LIST: the rewritten blocks, what dm-track would hand over)
#   dsync-z    the same with -z (deflate level 1) on the stream
#   rsync      rsync --inplace --no-whole-file -I SRC DST (the delta
#              algorithm; -I: never skip on equal size and mtime)
#   rsync-b4k  the same with -B 4096
#   blocksync  bench/blocksync.c: 128-bit digests of every 4 KiB block on
#              both ends, in parallel, only differing runs sent (the
#              paper's blockmd5sync, as fast as it can be made)
#   copy       dd bs=4M of the whole file
#   floor      bench/floor.c: read and write exactly the dirty blocks,
#              runs coalesced, in order, one at a time, readahead off
#   floor-p    floor -p: the same list, reads and writes overlapped in two
#              threads, readahead on (fewer, larger reads on dense
#              patterns)
#   floor-q    floor -q: the plain floor with the next runs always
#              announced (POSIX_FADV_WILLNEED), so the disk's queue stays
#              full as dmextract's in-flight extents keep it; the goals
#              are judged against the fastest floor
#
# Before each run the page cache is dropped (as root, echo 3 >
# /proc/sys/vm/drop_caches, as in the paper; otherwise, or with
# DROP_CACHES=files, only SRC and DST are evicted); each run ends with DST
# fsynced (the method's own fsync, then one more for those that have none:
# rsync), and DST is compared with SRC by cmp afterwards (not timed): a
# difference fails the benchmark. DST is then reset by rewriting the
# pattern's blocks with their old data, which cmp has just proved is the
# only difference.
#
# The disk this was built on is virtual, and what its host keeps cached is
# out of the guest's reach: the first read of blocks written shortly
# before took 2-6x as long as later reads of the same blocks (floor -q at
# 25 % random on 4 GiB: 9.3 s right after the images were filled, then
# 3.4-4.2 s). Whichever method ran first in a pattern paid for it, and
# dsync always ran first; and dmextract, which reads through gaps of up
# to 8 KiB, paid for those blocks too on its first run. So each pattern
# begins with an untimed warm-up (WARMUP=1, the default): one read of the
# whole source, and of the replica too when a method that reads it whole
# follows (rsync, blocksync, copy), then one floor -q run, which reads
# and writes exactly the pattern's blocks. Every timed run then finds the
# disk in the same state.
#
# Each run records wall and CPU seconds (bench/timed.c: what GNU time
# reports, to the microsecond, for all processes of the method), bytes
# read from and written to the disk (the rusage block counters), the
# bytes that would cross a network (the stream, rsync's sent + received,
# blocksync's digests + runs; for copy and floor the data they copy), and
# the load average when it started.
#
# Experiments (PARTS):
#   patterns   PATTERNS on SIZE_MIB, every method, REPS repetitions
#              interleaved (method order repeats, so drift hits all alike;
#              SLOW_METHODS only SLOW_REPS times: rsync takes minutes)
#   size       SCALE_COUNT dirty blocks (random) on each of SCALE_MIB,
#              SCALE_METHODS, SCALE_REPS
#   fraction   FRACTIONS % of the blocks dirty (random) on SIZE_MIB,
#              FRACTION_METHODS, FRACTION_REPS
#   big        the realistic pattern on BIG_MIB (32 GiB), BIG_METHODS,
#              BIG_REPS repetitions (rsync, blocksync and copy once: at
#              32 GiB they take minutes): the goal against rsync is set
#              at 32 GiB
#
# Two images of the largest size must fit in DIR (64 GiB for the default
# parts); the script says so and stops before filling the disk.
#
# Usage: bench/dsync-host.sh [DIR]     (DIR: scratch space for two images
#        of the largest size, default build/bench)
# Environment (defaults): SIZE_MIB (4096), PATTERNS ("realistic random:1
#   random:10"), METHODS (all above), REPS (3), SLOW_METHODS ("rsync
#   rsync-b4k"), SLOW_REPS (1), PARTS ("patterns fraction size big":
#   the order that fills the fewest images),
#   SCALE_MIB ("1024 4096 16384 32768"), SCALE_COUNT (10000),
#   SCALE_METHODS ("dsync floor floor-p floor-q blocksync"), SCALE_REPS
#   (1), FRACTIONS ("0.1 0.5 1 2 5 10 25"), FRACTION_METHODS ("dsync floor
#   floor-p floor-q blocksync"), FRACTION_REPS (1), SEED (1),
#   BIG_MIB (32768), BIG_METHODS ("dsync floor floor-q blocksync rsync"),
#   BIG_REPS (3),
#   WARMUP (1: the untimed warm-up above; 0: none),
#   RESULTS (bench/results), DROP_CACHES (all | files), VERIFY (cmp |
#   known: check DST byte for byte against the source's known content,
#   regenerated from the seeds, reading half as much as cmp), SKIP
#   (PATTERN/METHOD pairs not to run, e.g. "random:10/rsync-b4k")
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
bin=$top/build/bin
dir=${1:-$top/build/bench}
size_mib=${SIZE_MIB:-4096}
patterns=${PATTERNS:-realistic random:1 random:10}
methods=${METHODS:-dsync dsync-z rsync rsync-b4k blocksync copy floor floor-p floor-q}
reps=${REPS:-3}
slow_methods=${SLOW_METHODS:-rsync rsync-b4k}
slow_reps=${SLOW_REPS:-1}
parts=${PARTS:-patterns fraction size big}
scale_mib=${SCALE_MIB:-1024 4096 16384 32768}
scale_count=${SCALE_COUNT:-10000}
scale_methods=${SCALE_METHODS:-dsync floor floor-p floor-q blocksync}
scale_reps=${SCALE_REPS:-1}
fractions=${FRACTIONS:-0.1 0.5 1 2 5 10 25}
fraction_methods=${FRACTION_METHODS:-dsync floor floor-p floor-q blocksync}
fraction_reps=${FRACTION_REPS:-1}
big_mib=${BIG_MIB:-32768}
big_methods=${BIG_METHODS:-dsync floor floor-q blocksync rsync}
big_reps=${BIG_REPS:-3}
seed=${SEED:-1}
verify=${VERIFY:-cmp}
skip=${SKIP:-}
warmup=${WARMUP:-1}
results=${RESULTS:-$top/bench/results}
drop=${DROP_CACHES:-all}
[ "$(id -u)" = 0 ] || drop=files

die() { echo "dsync-host: $*" >&2; exit 1; }
for t in dmextract dmmerge; do
	[ -x "$bin/$t" ] || die "build/bin/$t is missing: run make"
done
for t in rsync dd cmp awk cc; do
	command -v $t >/dev/null || die "$t is missing: run scripts/deps.sh"
done

mkdir -p "$dir" "$results"
dir=$(cd "$dir" && pwd)
for p in bdata floor blocksync timed; do
	cc -O2 -march=native -Wall -Wextra -Werror -D_GNU_SOURCE -pthread \
		-o "$dir/$p" "$top/bench/$p.c" -lm
done
src=$dir/src.img
dst=$dir/dst.img
list=$dir/dirty.txt
tmp=$dir/run
mkdir -p "$tmp"

uncache() {
	sync
	if [ "$drop" = all ]; then
		echo 3 >/proc/sys/vm/drop_caches
	else
		local f
		for f in "$src" "$dst"; do
			dd if="$f" iflag=nocache count=0 status=none
		done
	fi
}

# images SIZE_MIB: SRC and DST of generation 0, if not there already
images() {
	local bytes=$(($1 << 20))
	if [ "$(stat -c %s "$src" 2>/dev/null)" != $bytes ] ||
	   [ "$(stat -c %s "$dst" 2>/dev/null)" != $bytes ] ||
	   ! cmp -s "$src" "$dst"; then
		rm -f "$src" "$dst"
		local avail
		avail=$(df -Pk "$dir" | awk 'NR == 2 { print int($4 / 1024) }')
		[ "$avail" -gt $(($1 * 2 + 1024)) ] ||
			die "two images of $1 MiB do not fit in $dir ($avail MiB free, with 1 GiB to spare): free space, or lower SIZE_MIB, SCALE_MIB or BIG_MIB"
		echo "# filling two images of $1 MiB" >&2
		"$dir/bdata" fill "$src" "$1"
		"$dir/bdata" fill "$dst" "$1"
	fi
}

# cmd METHOD: the command line that syncs DST from SRC
cmd() {
	case $1 in
	dsync) echo "$bin/dmextract --no-progress --dirty $list --device $src | $bin/dmmerge $dst" ;;
	dsync-z) echo "$bin/dmextract --no-progress -z --dirty $list --device $src | $bin/dmmerge $dst" ;;
	rsync) echo "rsync --inplace --no-whole-file -I --stats $src $dst" ;;
	rsync-b4k) echo "rsync --inplace --no-whole-file -I -B 4096 --stats $src $dst" ;;
	blocksync) echo "$dir/blocksync $src $dst" ;;
	copy) echo "dd if=$src of=$dst bs=4M conv=notrunc,fsync status=none" ;;
	floor) echo "$dir/floor $list $src $dst" ;;
	floor-p) echo "$dir/floor -p $list $src $dst" ;;
	floor-q) echo "$dir/floor -q $list $src $dst" ;;
	*) die "unknown method $1 (see the list at the top of $0)" ;;
	esac
}

# moved METHOD: bytes the method would send over a network
moved() {
	case $1 in
	dsync) "$bin/dmextract" --no-progress --dirty "$list" --device "$src" | wc -c ;;
	dsync-z) "$bin/dmextract" --no-progress -z --dirty "$list" --device "$src" | wc -c ;;
	rsync | rsync-b4k)
		awk -F': ' '/^Total bytes (sent|received)/ {
			gsub(/,/, "", $2); n += $2 } END { print n }' "$tmp/out" ;;
	blocksync) awk '{ print $1 }' "$tmp/out" ;;
	copy) stat -c %s "$src" ;;
	floor | floor-p | floor-q) cat "$tmp/out" ;;
	esac
}

csv=
# run EXPERIMENT MIB PATTERN DIRTY RUNS METHOD REP
run() {
	local c load w u s i o mv
	c=$(cmd "$6")
	uncache
	load=$(cut -d' ' -f1 /proc/loadavg)
	"$dir/timed" "$tmp/time" \
		bash -c "$c && dd of=$dst conv=notrunc,fsync count=0 status=none" >"$tmp/out" 2>"$tmp/err" ||
		{ cat "$tmp/err" >&2; die "$6 failed: $c"; }
	read -r w u s i o <"$tmp/time"
	if [ "$verify" = cmp ]; then
		cmp "$src" "$dst" >/dev/null ||
			die "$6 left a replica that differs from the source ($c)"
	else
		"$dir/bdata" verify "$dst" "$list" 1 ||
			die "$6 left a replica that differs from the source ($c)"
	fi
	mv=$(moved "$6")
	echo "$1,$2,$3,$4,$5,$6,$7,$w,$u,$s,$((i * 512)),$((o * 512)),$mv,$load" >>"$csv"
	printf '%-9s %6s MiB %-11s %8s blocks %-10s #%s  wall %6.2f s  cpu %6.2f s\n' \
		"$1" "$2" "$3" "$4" "$6" "$7" "$w" "$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }')" >&2
	"$dir/bdata" apply "$dst" "$list" 0
}

# warm METHODS...: the untimed warm-up (see the top), DST reset after it
warm() {
	[ "$warmup" = 1 ] || return 0
	cat "$src" >/dev/null
	case " $* " in
	*" rsync "* | *" rsync-b4k "* | *" blocksync "* | *" copy "*)
		cat "$dst" >/dev/null ;;
	esac
	# the pattern's blocks last, should the host keep less than all
	uncache
	"$dir/floor" -q "$list" "$src" "$dst" >/dev/null ||
		die "warm-up failed: floor -q $list $src $dst"
	"$dir/bdata" apply "$dst" "$list" 0
}

# pattern EXPERIMENT MIB PATTERN COUNT REPS METHODS...
pattern() {
	local exp=$1 mib=$2 pat=$3 count=$4 nreps=$5 dirty runs r m
	shift 5
	"$dir/bdata" list "$pat" $((mib << 8)) "$seed" $count >"$list" \
		2>"$tmp/stats" || { cat "$tmp/stats" >&2; die "no pattern $pat"; }
	read -r dirty runs <"$tmp/stats"
	"$dir/bdata" apply "$src" "$list" 1
	warm "$@"
	for r in $(seq 1 "$nreps"); do
		for m in "$@"; do
			if [ "$r" -gt "$slow_reps" ] &&
			   [[ " $slow_methods " == *" $m "* ]]; then
				continue
			fi
			[[ " $skip " == *" $pat/$m "* ]] && continue
			run "$exp" "$mib" "$pat" "$dirty" "$runs" "$m" "$r"
		done
	done
	"$dir/bdata" apply "$src" "$list" 0
}

header=experiment,size_mib,pattern,dirty_blocks,runs,method,rep,wall_s,user_s,sys_s,read_bytes,written_bytes,moved_bytes,load1
meta() {
	cat >"$results/dsync-host-$1.json" <<EOF
{
  "experiment": "$1",
  "command": "$2",
  "started": "$3",
  "finished": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "host_cpus": $(nproc),
  "cpu_model": "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)",
  "mem_gib": $(awk '/MemTotal/ { printf "%d", $2 / 1048576 }' /proc/meminfo),
  "kernel": "$(uname -r)",
  "fs": "$(df -T "$dir" | awk 'NR == 2 { print $2 " on " $1 }')",
  "drop_caches": "$drop",
  "warmup": $warmup,
  "load_start": "$4",
  "load_end": "$(cut -d' ' -f1-3 /proc/loadavg)",
  "rsync": "$(rsync --version | head -n 1)",
  "git": "$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)"
}
EOF
}

for part in $parts; do
	csv=$results/dsync-host-$part.csv
	echo "$header" >"$csv"
	started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	case $part in
	patterns)
		what="SIZE_MIB=$size_mib PATTERNS='$patterns' REPS=$reps SLOW_METHODS='$slow_methods' SLOW_REPS=$slow_reps SKIP='$skip' VERIFY=$verify"
		images "$size_mib"
		for p in $patterns; do
			pattern patterns "$size_mib" "$p" "" "$reps" $methods
		done ;;
	size)
		what="SCALE_MIB='$scale_mib' SCALE_COUNT=$scale_count SCALE_REPS=$scale_reps VERIFY=$verify"
		for mib in $scale_mib; do
			images "$mib"
			pattern size "$mib" random:1 "$scale_count" \
				"$scale_reps" $scale_methods
		done ;;
	fraction)
		what="SIZE_MIB=$size_mib FRACTIONS='$fractions' FRACTION_REPS=$fraction_reps VERIFY=$verify"
		images "$size_mib"
		for f in $fractions; do
			pattern fraction "$size_mib" "random:$f" "" \
				"$fraction_reps" $fraction_methods
		done ;;
	big)
		what="BIG_MIB=$big_mib BIG_METHODS='$big_methods' BIG_REPS=$big_reps VERIFY=$verify"
		images "$big_mib"
		slow_methods="rsync rsync-b4k blocksync copy" slow_reps=1 \
			pattern big "$big_mib" realistic "" "$big_reps" \
			$big_methods ;;
	*) die "unknown part $part (patterns, size, fraction, big)" ;;
	esac
	meta "$part" "$what bench/dsync-host.sh" "$started" "$load"
done
rm -rf "$src" "$dst" "$list" "$tmp"
echo "dsync-host: results in ${results#"$top"/}/dsync-host-*.csv" >&2
