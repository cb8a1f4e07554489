#!/bin/bash
# dmextract --dirty | dmmerge makes the replica byte-identical to the source
# (cmp), for random dirty blocks, zero runs, ranges, compression, block
# sizes, a partial last block, sparse files; and sends only what was listed.
# timeout: 300
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/dsync_lib.sh"
need_tools

cd "$TMP" || exit 1

# incremental: random blocks of a 64 MiB image, a third of them zeroed
mkimg src 64
cp src dst
scribble src 700 1 >dirty
dmextract --dirty dirty --device src | dmmerge dst
check "incremental stream makes the replica identical" cmp -s src dst

# and it was only the listed blocks: the stream is about their size
dmextract --dirty dirty --device src -o s1
size=$(stat -c %s s1)
[ "$size" -lt $((700 * 4096 + 700 * 40 + 4096)) ] &&
	ok "the stream holds only the dirty blocks ($size bytes)" ||
	not_ok "the stream holds only the dirty blocks ($size bytes)"

# a block that changed but is not listed is not sent
cp src src2
cp dst dst2
printf 'different' | dd of=src2 bs=1 seek=$((4096 * 5000)) conv=notrunc status=none
printf '7\n' | dmextract --dirty - --device src2 | dmmerge dst2
if cmp -s dst dst2; then
	ok "blocks outside the dirty list are not sent"
else
	not_ok "blocks outside the dirty list are not sent"
fi

# ranges, unsorted, duplicated, comments, blank lines
cp src src3
cp src dst3
scribble src3 300 2 >/dev/null
$PY - <<'PY' >list3
import random
r = random.Random(3)
# ranges covering everything scribble touched, in a shuffled order
runs = ["%d-%d" % (a, a + 1023) for a in range(0, 16384, 1024)]
r.shuffle(runs)
print("# dirty blocks\n")
print("\n".join(runs))
print("17\n17-20\n  5  ")
PY
dmextract --dirty list3 --device src3 | dmmerge dst3
check "ranges, unsorted and duplicate entries round-trip" cmp -s src3 dst3

# compressed streams
cp src srcz
cp src dstz
scribble srcz 500 4 >dirtyz
$PY -c "
f = open('srcz', 'r+b')
for b in range(8000, 8400):
    f.seek(b * 4096); f.write(b'compressible text ' * 227 + bytes(10))
"
(cat dirtyz; echo 8000-8399) >dirtyz2
dmextract -z --dirty dirtyz2 --device srcz -o z.stream
dmextract --dirty dirtyz2 --device srcz -o plain.stream
dmmerge dstz <z.stream
check "compressed stream makes the replica identical" cmp -s srcz dstz
[ "$(stat -c %s z.stream)" -lt "$(stat -c %s plain.stream)" ] &&
	ok "compression makes the stream smaller" ||
	not_ok "compression makes the stream smaller"
dmextract -z9 --dirty dirtyz2 --device srcz | dmmerge --verify
check "a level 9 stream verifies" test $? = 0

# other block sizes, and a size that is not a multiple of the block size
for bs in 512 65536 1048576; do
	head -c $((10 * 1024 * 1024 + 1000)) /dev/urandom >sb
	cp sb db
	scribble sb 6 $bs $bs >list
	# and the partial last block
	last=$(( (10 * 1024 * 1024 + 1000) / bs ))
	printf 'tail%07d' $bs | dd of=sb bs=1 seek=$((last * bs + 3)) \
		conv=notrunc status=none
	echo $last >>list
	cmp -s sb db && not_ok "block size $bs: the test changed nothing"
	dmextract -b $bs --dirty list --device sb | dmmerge db
	check "block size $bs with a partial last block round-trips" cmp -s sb db
done

# full streams: seed a new file; a sparse source stays sparse
truncate -s 256M sparse
dd if=/dev/urandom of=sparse bs=1M count=3 seek=100 conv=notrunc status=none
dd if=/dev/urandom of=sparse bs=4k count=1 seek=7 conv=notrunc status=none
dmextract --all --device sparse -o full.stream
dmmerge seeded <full.stream
check "a full stream seeds a new replica" cmp -s sparse seeded
[ "$(stat -c %s full.stream)" -lt $((4 * 1024 * 1024)) ] &&
	ok "holes travel as zero runs, not as bytes" ||
	not_ok "holes travel as zero runs ($(stat -c %s full.stream) bytes)"
used=$(du -k seeded | cut -f1)
[ "$used" -lt 16384 ] && ok "the seeded replica is sparse (${used} KiB)" ||
	not_ok "the seeded replica is sparse (${used} KiB used)"

# blocks larger than the file system's holes: a block partly in a hole is
# data, one wholly in a hole a zero run
truncate -s 10M sp
head -c 4096 /dev/urandom | dd of=sp bs=1 seek=$((1048576 + 8192)) \
	conv=notrunc status=none
printf 'tail' | dd of=sp bs=1 seek=$((5 * 1048576 - 4)) conv=notrunc status=none
for bs in 65536 1048576; do
	rm -f sp.$bs
	dmextract -b $bs --all --device sp | dmmerge sp.$bs
	check "$bs-byte blocks over 4 KiB holes round-trip" cmp -s sp sp.$bs
done

# a full stream over an existing replica with other contents
mkimg other 64
dmextract --all --device src | dmmerge other
check "a full stream overwrites every block of a replica" cmp -s src other

# the writer side fails cleanly when the reader goes away
mkimg big 32
dmextract --all --device big 2>err | head -c 1000 >/dev/null
rc=${PIPESTATUS[0]}
[ "$rc" = 1 ] && grep -q "closed" err &&
	ok "a closed pipe makes dmextract fail and say so" ||
	not_ok "a closed pipe makes dmextract fail and say so (rc $rc: $(cat err))"

# a dirty list with a block past the end names the line
printf '1\n99999999\n' >badlist
run_status dmextract --dirty badlist --device src -o /dev/null
[ $status = 1 ] && grep -q "badlist:2: block 99999999 is past the end" "$TMP/err" &&
	ok "a block past the end of the device is refused with its line" ||
	not_ok "a block past the end is refused ($status: $(cat "$TMP/err"))"
printf '1\nfoo\n' >badlist
run_status dmextract --dirty badlist --device src -o /dev/null
[ $status = 1 ] && grep -q 'badlist:2: expected a block number' "$TMP/err" &&
	ok "a malformed dirty list line is refused with its line" ||
	not_ok "a malformed line is refused ($status: $(cat "$TMP/err"))"

done_testing
