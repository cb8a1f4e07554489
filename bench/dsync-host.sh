#!/bin/bash
# dsync against the alternatives, on host files, side by side.
#
# A sparse image (SIZE_GIB, DATA_PCT of it written) and a replica identical
# to it; then CHANGE_PCTS percent of its 4 KiB blocks are rewritten (in runs
# like a file system writes them: 1 to 16 blocks), and the replica is
# brought up to date by:
#
#   dsync      dmextract --dirty LIST --device SRC | dmmerge DST
#              (LIST: the changed blocks, what dm-track would know)
#   dsync -z   the same with a deflated stream
#   rsync      rsync --inplace --no-whole-file SRC DST (the delta algorithm)
#   blocksum   md5 of every 4 KiB block on both sides, copy the blocks that
#              differ (the paper's "blockmd5sync"; a Python loop)
#   copy       dd bs=4M of the whole image
#
# Every method starts with both files out of the page cache, ends with the
# replica synced (fsync), and is checked with cmp afterwards (not timed).
#
# First, bench/stream_speed.c measures the stream's CPU cost on one core
# (CRC32C, writer, reader; in memory, no I/O).
#
# Usage: bench/dsync-host.sh [DIR]     (DIR default: build/bench, needs
#        about 3 x SIZE_GIB x DATA_PCT / 100 of free space)
# Environment: SIZE_GIB (4), DATA_PCT (50), CHANGE_PCTS ("1 10"),
#              METHODS ("dsync dsync-z rsync blocksum copy")
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
bin=$top/build/bin
dir=${1:-$top/build/bench}
size_gib=${SIZE_GIB:-4}
data_pct=${DATA_PCT:-50}
change_pcts=${CHANGE_PCTS:-1 10}
methods=${METHODS:-dsync dsync-z rsync blocksum copy}
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3

for t in dmextract dmmerge; do
	[ -x "$bin/$t" ] || { echo "build/bin/$t is missing: run make" >&2; exit 1; }
done
for t in rsync dd cmp awk; do
	command -v $t >/dev/null || { echo "$t is missing" >&2; exit 1; }
done

mkdir -p "$dir"
cc -O2 -D_GNU_SOURCE -I"$top/libtrack/include" -I"$top/libtrack/src" \
	-o "$dir/stream_speed" "$top/bench/stream_speed.c" \
	"$top/build/lib/libtrack.a" -lz
pin=
command -v taskset >/dev/null && pin="taskset -c 0"
$pin "$dir/stream_speed" 256
echo
cd "$dir"
src=src.img
base=base.img
dst=dst.img

# drop FILE... from the page cache
uncache() {
	local f
	for f in "$@"; do
		dd if="$f" iflag=nocache count=0 status=none
		dd of="$f" oflag=nocache conv=notrunc,fdatasync count=0 status=none
	done
}

echo "# making a $size_gib GiB image, $data_pct % written"
rm -f "$src" "$base" "$dst"
$py - "$src" "$size_gib" "$data_pct" <<'PY'
import os, random, sys
path, gib, pct = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
size = gib << 30
rnd = random.Random(1)
with open(path, "wb") as f:
    f.truncate(size)
    # written extents of 1 to 64 MiB, the rest holes
    chunk = 1 << 20
    for c in range(size // chunk):
        if rnd.random() * 100 < pct:
            f.seek(c * chunk)
            f.write(os.urandom(chunk))
PY
cp --sparse=always "$src" "$base"

# change PCT percent of the blocks of SRC, write the dirty list
change() {
	$py - "$src" "$1" >dirty.txt <<'PY'
import os, random, sys
path, pct = sys.argv[1], float(sys.argv[2])
bs = 4096
nblocks = os.path.getsize(path) // bs
rnd = random.Random(int(pct * 100))
target = int(nblocks * pct / 100)
done = set()
with open(path, "r+b") as f:
    while len(done) < target:
        first = rnd.randrange(nblocks)
        n = min(rnd.randint(1, 16), nblocks - first)
        f.seek(first * bs)
        f.write(os.urandom(n * bs))
        done.update(range(first, first + n))
for b in sorted(done):
    print(b)
PY
}

# run NAME CMD...: time CMD (wall, CPU), after resetting the replica
declare -A wall cpu sent
run() {
	local name=$1 t
	shift
	cp --sparse=always "$base" "$dst"
	uncache "$src" "$dst"
	sync
	TIMEFORMAT='%R %U %S'
	{ time bash -c "$*; sync -f $dst" >out.txt 2>err.txt; } 2>time.out ||
		{ cat err.txt >&2; exit 1; }
	read -r w u s <time.out
	wall[$name]=$w
	cpu[$name]=$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }')
	cmp -s "$src" "$dst" || { echo "$name: the replica differs!" >&2; exit 1; }
}

blocksum_py=$(cat <<'PY'
import hashlib, sys
src, dst = sys.argv[1], sys.argv[2]
bs, chunk, sent = 4096, 1 << 20, 0
with open(src, "rb") as a, open(dst, "r+b") as b:
    off = 0
    while True:
        x = a.read(chunk)
        if not x:
            break
        y = b.read(len(x))
        for i in range(0, len(x), bs):
            if hashlib.md5(x[i:i + bs]).digest() != \
               hashlib.md5(y[i:i + bs]).digest():
                b.seek(off + i)
                b.write(x[i:i + bs])
                sent += bs
        b.seek(off + len(x))
        off += len(x)
print(sent)
PY
)

printf '\n%-9s %-9s %9s %9s %12s %9s %8s\n' "changed" "method" "wall s" "cpu s" \
	"sent bytes" "vs dsync" "vs copy"
for pct in $change_pcts; do
	cp --sparse=always "$base" "$src"
	change "$pct"
	nchanged=$(wc -l <dirty.txt)
	for m in $methods; do
		case $m in
		dsync)
			run $m "$bin/dmextract --dirty dirty.txt --device $src |
				$bin/dmmerge $dst"
			sent[$m]=$("$bin/dmextract" --dirty dirty.txt \
				--device $src | wc -c) ;;
		dsync-z)
			run $m "$bin/dmextract -z --dirty dirty.txt --device $src |
				$bin/dmmerge $dst"
			sent[$m]=$("$bin/dmextract" -z --dirty dirty.txt \
				--device $src | wc -c) ;;
		rsync)
			run $m "rsync --inplace --no-whole-file --stats $src $dst"
			sent[$m]=$(sed -n 's/^Total bytes sent: \([0-9,]*\).*/\1/p' out.txt |
				tr -d ,) ;;
		blocksum)
			run $m "$py -c '$blocksum_py' $src $dst"
			sent[$m]=$(cat out.txt) ;;
		copy)
			run $m "dd if=$src of=$dst bs=4M conv=notrunc status=none"
			sent[$m]=$((size_gib << 30)) ;;
		esac
	done
	for m in $methods; do
		printf '%-9s %-9s %9.2f %9.2f %12s %8.1fx %7.2fx\n' \
			"$pct% ($nchanged)" "$m" "${wall[$m]}" "${cpu[$m]}" \
			"${sent[$m]}" \
			"$(awk -v a="${wall[$m]}" -v b="${wall[dsync]}" \
				'BEGIN { print (b > 0 ? a / b : 0) }')" \
			"$(awk -v a="${wall[$m]}" -v b="${wall[copy]:-${wall[$m]}}" \
				'BEGIN { print (b > 0 ? a / b : 0) }')"
	done
done
echo
echo "# $(nproc) CPUs, $(uname -r), $(df -T "$dir" | awk 'NR == 2 { print $2 }') on $(df "$dir" | awk 'NR == 2 { print $1 }'), load $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f "$src" "$base" "$dst" dirty.txt out.txt err.txt time.out stream_speed
