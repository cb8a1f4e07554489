#!/bin/bash
# dmmerge --state applies a stream only on the base it was cut from:
# same source, base <= last applied < new; full streams on any base of the
# same source. Refusals write nothing and leave the state file alone;
# --force overrides and says what it overrode.
# timeout: 120
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/dsync_lib.sh"
need_tools

cd "$TMP" || exit 1
mkimg src 8
printf '1\n5-9\n100\n' >dirty

# stream NAME BASE NEW [extra dmextract options]
stream() {
	local name=$1 base=$2 new=$3
	shift 3
	dmextract --dirty dirty --device src --source-id vm1 \
		--base-epoch "$base" --new-epoch "$new" "$@" -o "$name" ||
		fail "dmextract $name failed"
}

# accepted NAME STREAM EPOCH: applies, and the state says EPOCH
accepted() {
	run_status dmmerge --state state t <"$2"
	if [ $status = 0 ] && grep -q "^epoch $3\$" state; then
		ok "$1"
	else
		not_ok "$1 ($status: $(cat "$TMP/err"))"
	fi
}

# refused NAME STREAM PATTERN: exit 1 with PATTERN, target and state
# unchanged
refused() {
	cp state state.before 2>/dev/null || rm -f state.before
	cp t t.orig
	# make the stream's blocks differ, so that any write would show
	for b in 1 5 6 7 8 9 100; do
		dd if=/dev/urandom of=t bs=4096 seek=$b count=1 conv=notrunc \
			status=none
	done
	cp t t.before
	run_status dmmerge --state state t <"$2"
	if [ $status = 1 ] && grep -q -- "$3" "$TMP/err" &&
		cmp -s t t.before && { [ ! -e state.before ] ||
		cmp -s state state.before; }; then
		ok "$1"
	else
		not_ok "$1 ($status: $(cat "$TMP/err"))"
	fi
	# put them back: dmmerge's replica fingerprint would (rightly) take
	# them for a change behind its state file
	cp t.orig t
}

head -c 8M /dev/zero >t
stream s2-5 2 5
refused "no state file: an incremental stream is refused" s2-5 \
	"does not exist"
dmextract --all --device src --source-id vm1 --new-epoch 5 -o full5
accepted "no state file: a full stream seeds it" full5 5
cmp -s t src || not_ok "the full stream made the replica identical"

stream s5-7 5 7
accepted "base == last applied is accepted" s5-7 7
refused "the same stream again (a replay) is refused" s5-7 "not newer"
stream s3-6 3 6
refused "an old stream (new <= last) is refused" s3-6 "roll blocks back"
stream s8-9 8 9
refused "a gap (base > last) is refused" s8-9 "would be missing"
stream s6-9 6 9
accepted "a superset (base < last < new) is accepted" s6-9 9
dmextract --dirty dirty --device src --source-id vm2 --base-epoch 9 \
	--new-epoch 10 -o other
refused "a stream from another source is refused" other \
	'comes from "vm2", but t was last updated from "vm1"'
dmextract --all --device src --source-id vm2 --new-epoch 3 -o otherfull
refused "a full stream from another source is refused" otherfull \
	"wrong target"
dmextract --dirty dirty --device src --source-id vm1 -o noepoch
refused "an incremental stream without epochs is refused" noepoch \
	"has no epochs"
stream s9-10-512 9 10 --block-size 512
refused "a stream with another block size is refused" s9-10-512 \
	"512-byte blocks"

run_status dmmerge --state state --force t <s3-6
[ $status = 0 ] && grep -q "warning: .*roll blocks back.*--force" "$TMP/err" &&
	grep -q "^epoch 6$" state &&
	ok "--force applies an old stream and says what it overrode" ||
	not_ok "--force ($status: $(cat "$TMP/err"))"

dmextract --all --device src --source-id vm1 --new-epoch 20 -o full20
accepted "a full stream from the same source is accepted on any base" \
	full20 20

cp state state.before
run_status dmmerge --state state --verify t <s8-9
[ $status = 1 ] && cmp -s state state.before &&
	ok "--verify applies the epoch rule too and changes nothing" ||
	not_ok "--verify and the epoch rule ($status)"

echo garbage >state
run_status dmmerge --state state t <full20
[ $status = 1 ] && grep -q "state file state is damaged" "$TMP/err" &&
	ok "a damaged state file is reported, nothing applied" ||
	not_ok "damaged state file ($status: $(cat "$TMP/err"))"

done_testing
