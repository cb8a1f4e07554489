#!/bin/bash
# Every damage a stream can suffer on its way is refused with a message that
# names the byte offset, and a non-zero exit: each header field wrong, a
# flipped bit in any record header or payload, a cut at and between every
# record boundary, runs past the end, zero and huge counts, lost or
# reordered records, a stream for another device. A header error writes
# nothing; a record error leaves exactly the records before it applied;
# nothing is ever written outside the target.
# timeout: 600
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/dsync_lib.sh"
need_tools

cd "$TMP" || exit 1
size=$((4 * 1024 * 1024))
head -c $size /dev/urandom >old
cp old new
scribble new 40 1 >dirty
# runs of several blocks, zero runs among them, and the last block
$PY -c "
f = open('new', 'r+b')
f.seek(100 * 4096); f.write(bytes(20 * 4096))
f.seek(200 * 4096); f.write(b'x' * 300 * 4096)
f.seek($size - 4096); f.write(b'last' * 1024)
"
(cat dirty; echo 100-119; echo 200-499; echo $((size / 4096 - 1))) >dirty2
for mode in plain z; do
	flag=
	[ $mode = z ] && flag=-z
	dmextract $flag --dirty dirty2 --device new -o $mode.stream ||
		fail "dmextract failed"
done
cp old t && dmmerge t <plain.stream && cmp -s t new ||
	not_ok "the undamaged stream applies"
nrec=$(stream_tool records plain.stream | wc -l)
diag "plain.stream: $(stat -c %s plain.stream) bytes, $nrec records"

# expect_refused NAME STREAM K PATTERN: dmmerge exits 1, says PATTERN and
# (unless the target is wrong) the byte offset, and exactly records 0 .. K-1
# reached the target.
expect_refused() {
	local name=$1 stream=$2 k=$3 pattern=$4 why
	cp old t
	dmmerge t <"$stream" 2>"$TMP/err"
	status=$?
	if [ $status != 1 ]; then
		why="exit status $status"
	elif ! grep -q "offset [0-9]\|the stream is for a device" "$TMP/err"; then
		why="no offset in: $(cat "$TMP/err")"
	elif ! grep -q -- "$pattern" "$TMP/err"; then
		why="no \"$pattern\" in: $(cat "$TMP/err")"
	elif ! why=$(prefix_applied t old new "$stream" "$k" 2>&1); then
		:
	else
		ok "$name"
		return
	fi
	not_ok "$name: $why"
}

# --- the header: each field wrong, with a valid checksum ---------------------
hdr() {
	cp plain.stream h.stream
	stream_tool set-header h.stream "$1" "$2"
	expect_refused "header $1=$2 is refused, nothing written" h.stream 0 "$3"
}
hdr magic "XDSYNC12" "not a dsync stream"
hdr vmajor 2 "version 2.0"
hdr len 100 "header length 100"
hdr flags 0x100 "unknown header flags"
hdr block 3000 "block size 3000"
hdr block 256 "block size 256"
hdr devsize 0 "device size 0"
hdr devsize $((size + 4096)) "the stream is for a device of $((size + 4096)) bytes"
hdr devsize $((size - 4096)) "the stream is for a device of"
hdr base 9 "base epoch 9 is not before"
hdr source $'bad\x01id' "source id"
cp plain.stream h.stream
stream_tool set-header h.stream crc 0
expect_refused "a header checksum mismatch is refused, nothing written" \
	h.stream 0 "header checksum mismatch"
cp plain.stream h.stream
stream_tool flip h.stream 70
expect_refused "a flipped bit in the source id is refused" h.stream 0 \
	"header checksum mismatch"

# --- a flipped bit anywhere in a record -------------------------------------
for mode in plain z; do
	while read -r seq type first count hoff poff end; do
		for off in $hoff $((hoff + 17)) $((hoff + 39)); do
			cp $mode.stream f.stream
			stream_tool flip f.stream $off
			expect_refused "$mode: bit flip in record $seq's header (byte $off)" \
				f.stream "$seq" "offset $hoff: "
		done
		if [ "$end" -gt "$poff" ]; then
			for off in $poff $(((poff + end) / 2)) $((end - 1)); do
				cp $mode.stream f.stream
				stream_tool flip f.stream $off
				expect_refused "$mode: bit flip in record $seq's payload (byte $off)" \
					f.stream "$seq" "checksum mismatch"
			done
		fi
	done < <(stream_tool records $mode.stream | awk 'NR % 7 == 1 || $2 == 3')
done

# --- cut at every record boundary and inside every record -------------------
while read -r seq type first count hoff poff end; do
	for cut in $hoff $((hoff + 20)) $poff $(((poff + end) / 2)); do
		[ $cut -ge "$end" ] && continue
		head -c $cut plain.stream >c.stream
		expect_refused "cut at byte $cut (record $seq) is refused as truncated" \
			c.stream "$seq" "truncated"
	done
done < <(stream_tool records plain.stream)
head -c 100 plain.stream >c.stream
expect_refused "cut inside the header is refused" c.stream 0 "truncated"

# --- well-formed records that say wrong things ------------------------------
nblocks=$((size / 4096))
# d: a data record after a few others
d=$(stream_tool records plain.stream | awk '$2 == 1 && $1 >= 2 { print $1; exit }')
rec() {
	cp plain.stream r.stream
	stream_tool set-record r.stream "$1" "$2" "$3"
	expect_refused "record $1 with $2=$3 is refused" r.stream "$1" "$4"
}
rec $d first $nblocks "past the end of the device"
# a run of several blocks that starts inside the device and ends outside
multi=$(stream_tool records plain.stream | awk '$2 == 1 && $4 > 1 { print $1; exit }')
rec $multi first $((nblocks - 1)) "past the end of the device"
rec $d count 0 "covers no blocks"
rec $d count 0xffffffffffffffff "past the end of the device"
rec $d count 0x1000000 "past the end of the device"
rec $d first 0 "not after the previous record"
rec $d seq $((d + 1)) "records were lost"
rec $d type 0x42 "unknown type 0x0042"
rec $d plen 0 "payload length 0"
rec $d flags 1 "deflated in a stream without compression"
rec $d flags 4 "unknown flags 0x4"

# a record for another block size: the payload no longer fits the run
cp plain.stream r.stream
stream_tool set-header r.stream block 8192
stream_tool set-header r.stream devsize $size
expect_refused "a stream re-labelled with another block size is refused" \
	r.stream 0 "payload length"

# --- not a stream at all ----------------------------------------------------
: >empty
expect_refused "empty input is refused" empty 0 "the stream is empty"
head -c 5000 /dev/urandom >noise
expect_refused "random bytes are refused" noise 0 "not a dsync stream"
sed 's/\r$//' plain.stream >mangled
expect_refused "CR LF turned into LF is diagnosed" mangled 0 "CR LF"
(cat plain.stream; echo extra) >trail.stream
cp old t
run_status dmmerge t <trail.stream
[ $status = 1 ] && grep -q "follows the end record" "$TMP/err" &&
	ok "data after the end record is an error" ||
	not_ok "data after the end record is an error ($status)"

# --verify checks all of it without writing
cp old t
cp plain.stream f.stream
stream_tool flip f.stream $(($(stat -c %s f.stream) - 30))
run_status dmmerge --verify t <f.stream
[ $status = 1 ] && cmp -s t old &&
	ok "--verify finds damage at the end and writes nothing" ||
	not_ok "--verify finds damage at the end ($status)"
run_status dmmerge --verify t <plain.stream
[ $status = 0 ] && cmp -s t old &&
	ok "--verify accepts a good stream and writes nothing" ||
	not_ok "--verify accepts a good stream ($status: $(cat "$TMP/err"))"

done_testing
