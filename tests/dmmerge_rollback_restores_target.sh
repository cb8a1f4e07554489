#!/bin/bash
# dmmerge --undo then --rollback restores the target byte for byte: after a
# stream cut in the middle, after a complete apply (and the state file goes
# back too), and after dmmerge was killed with SIGKILL while writing.
# timeout: 300
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/dsync_lib.sh"
need_tools

cd "$TMP" || exit 1
mkimg old 48
cp old new
scribble new 3000 1 >dirty
# a long run so that several undo batches are written
dd if=/dev/urandom of=new bs=1M count=40 seek=4 conv=notrunc status=none
(cat dirty; echo 1024-11263) >dirty2
dmextract --dirty dirty2 --device new --new-epoch 8 --base-epoch 5 \
	--source-id vm1 -o s.stream || fail "dmextract failed"
len=$(stat -c %s s.stream)
nrec=$(stream_tool records s.stream | wc -l)
diag "stream: $len bytes, $nrec records"

# cut at a record boundary, inside a header, inside a payload, near the end
for cut in $((len / 3)) $(stream_tool records s.stream |
	awk -v n="$nrec" 'NR == int(n / 2) { print $5, $5 + 10, $6 + 100 }') \
	$((len - 60)); do
	cp old t
	rm -f u
	head -c $cut s.stream | dmmerge --undo u t 2>err
	[ $? = 1 ] || not_ok "cut at $cut: dmmerge did not fail"
	if cmp -s t old; then
		grep -q "t was not changed" err ||
			not_ok "cut at $cut: no write, but no \"not changed\""
	else
		grep -q "dmmerge --rollback u" err ||
			not_ok "cut at $cut: no offer of the rollback"
	fi
	run_status dmmerge --rollback u t
	[ $status = 0 ] && cmp -s t old &&
		ok "cut at byte $cut: rollback restores the target" ||
		not_ok "cut at byte $cut: rollback ($status: $(cat "$TMP/err"))"
done

# a complete apply, rolled back, also rolls the state file back
cp old t
printf 'source-id vm1\nepoch 5\nblock-size 4096\ndevice-size %d\n' \
	$((48 * 1024 * 1024)) >state
dmmerge --state state --undo u t <s.stream || not_ok "apply failed"
cmp -s t new || not_ok "the apply did not produce the new contents"
grep -q '^epoch 8$' state || not_ok "the state file did not move to epoch 8"
run_status dmmerge --rollback u --state state t
[ $status = 0 ] && cmp -s t old &&
	ok "rollback of a complete apply restores the target" ||
	not_ok "rollback of a complete apply ($status: $(cat "$TMP/err"))"
grep -q '^epoch 5$' state &&
	ok "rollback of a complete apply puts the state back to epoch 5" ||
	not_ok "state after rollback: $(cat state)"
dmmerge --state state t <s.stream
check "after the rollback, the same stream applies again" cmp -s t new

# dmmerge killed (SIGKILL) in the middle of writing: the undo file has no
# end record, and may end inside a record
killed=0
for try in 1 2 3; do
	cp old t
	rm -f u
	mkfifo fifo
	dmmerge --undo u t <fifo 2>/dev/null &
	pid=$!
	{
		head -c $((len * 2 / 3)) s.stream
		sleep 30
	} >fifo &
	feeder=$!
	# wait until at least one batch went to the target
	for _ in $(seq 100); do
		cmp -s t old || break
		sleep 0.1
	done
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	kill $feeder 2>/dev/null
	wait $feeder 2>/dev/null
	rm -f fifo
	if ! cmp -s t old; then
		killed=1
		break
	fi
done
if [ $killed = 1 ]; then
	run_status dmmerge --rollback u t
	[ $status = 0 ] && cmp -s t old &&
		ok "rollback after dmmerge was killed restores the target" ||
		not_ok "rollback after kill -9 ($status: $(cat "$TMP/err"))"
else
	not_ok "could not kill dmmerge after it wrote something"
fi

# the undo file is only accepted for rollback, and only by its target
run_status dmmerge t <u
[ $status = 1 ] && grep -q "undo file" "$TMP/err" &&
	ok "an undo file is not applied as a stream" ||
	not_ok "an undo file on stdin ($status)"
head -c 1M /dev/zero >small
run_status dmmerge --rollback u small
[ $status = 1 ] && cmp -s small <(head -c 1M /dev/zero) &&
	ok "rollback into the wrong target is refused" ||
	not_ok "rollback into the wrong target ($status)"
run_status dmmerge --rollback s.stream t
[ $status = 1 ] && grep -q "not an undo file" "$TMP/err" &&
	ok "a stream is not taken as an undo file" ||
	not_ok "a stream as undo file ($status)"

# an undo file is written only once the stream is accepted
rm -f u2
cp new t
run_status dmmerge --state state --undo u2 t <s.stream
[ $status = 1 ] && [ ! -e u2 ] && cmp -s t new &&
	ok "a refused stream leaves no undo file and the target alone" ||
	not_ok "refused stream and undo ($status, $(ls u2 2>&1))"

done_testing
