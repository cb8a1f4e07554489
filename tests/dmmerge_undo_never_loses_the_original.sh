#!/bin/bash
# An undo file is the only copy of what a replica held before an apply, and
# the operator's next command must not be able to spoil it or the replica:
#  - a rollback with an undo file older than the state's epoch is refused
#    (it would write old blocks back under a state that says "current");
#  - an undo path that is the target (same path spelt differently, a hard
#    link) is refused before anything is opened for writing;
#  - re-running a failed --undo apply keeps the first undo file, so a
#    rollback still reaches the original contents.
# timeout: 120
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/dsync_lib.sh"
need_tools

cd "$TMP" || exit 1
mkimg e1 4
cp e1 e2
scribble e2 100 1 >d12
cp e2 e3
scribble e3 100 2 >d23
cp e3 e4
scribble e4 100 3 >d34
dmextract --dirty d12 --device e2 --source-id vm1 --base-epoch 1 \
	--new-epoch 2 -o s12 || fail "dmextract s12"
dmextract --dirty d23 --device e3 --source-id vm1 --base-epoch 2 \
	--new-epoch 3 -o s23 || fail "dmextract s23"
dmextract --dirty d34 --device e4 --source-id vm1 --base-epoch 3 \
	--new-epoch 4 -o s34 || fail "dmextract s34"
setstate() {
	printf 'source-id vm1\nepoch %s\nblock-size 4096\ndevice-size %d\n' \
		"$1" $((4 * 1024 * 1024)) >state
}

# 1. a stale undo file: 1->2 keeping U12, 2->3, then --rollback U12
cp e1 rep.img
setstate 1
dmmerge --state state --undo U12 rep.img <s12 || fail "apply 1->2"
dmmerge --state state --undo U23 rep.img <s23 || fail "apply 2->3"
cp rep.img rep.before
cp state state.before
run_status dmmerge --rollback U12 --state state rep.img
if [ $status = 1 ] && cmp -s rep.img rep.before &&
	cmp -s state state.before && grep -q "epoch 3" "$TMP/err" &&
	grep -q "U23\|newer\|--all" "$TMP/err"; then
	ok "a rollback with an undo file older than the state is refused"
else
	not_ok "stale rollback: exit $status, $(cat "$TMP/err")"
fi
# the undo files in the right order do reach epoch 1
dmmerge --rollback U23 --state state rep.img 2>/dev/null &&
	dmmerge --rollback U12 --state state rep.img 2>/dev/null &&
	cmp -s rep.img e1 && grep -q '^epoch 1$' state &&
	ok "rolling back U23 then U12 reaches epoch 1" ||
	not_ok "newest-first rollback did not reach epoch 1"
# an undo file of another source is refused too
sed -i 's/^source-id vm1$/source-id vm2/' state
cp state state.before
dmmerge --state state --undo U12b rep.img <s12 2>/dev/null
run_status dmmerge --rollback U12 --state state rep.img
[ $status = 1 ] && cmp -s state state.before &&
	ok "a rollback with an undo file of another source is refused" ||
	not_ok "foreign rollback: exit $status, $(cat "$TMP/err")"

# 2. the undo path names the target
cp e1 rep.img
setstate 1
ln rep.img hard.img
for u in ./rep.img "$TMP/rep.img" hard.img; do
	run_status dmmerge --state state --undo "$u" rep.img <s12
	if [ $status != 0 ] && cmp -s rep.img e1 &&
		grep -q "target" "$TMP/err"; then
		ok "--undo $u (the target itself) is refused, target intact"
	else
		not_ok "--undo $u: exit $status, size $(stat -c %s rep.img)," \
			"$(cat "$TMP/err")"
		cp e1 rep.img
	fi
done

# 4. a failed --undo apply, run again and failing again, keeps U (the
# stream is long enough that an undo batch reaches the target before the
# cut)
mkimg b1 40
# zero blocks, saved as zero runs in the undo file
dd if=/dev/zero of=b1 bs=4096 seek=1000 count=50 conv=notrunc status=none
cp b1 b2
dd if=/dev/urandom of=b2 bs=1M count=34 seek=3 conv=notrunc status=none
echo 768-9471 >db
dmextract --dirty db --device b2 --source-id vm1 --base-epoch 1 \
	--new-epoch 2 -o sb || fail "dmextract sb"
cp b1 big.img
rm -f U
len=$(stat -c %s sb)
head -c $((len * 9 / 10)) sb >cut
run_status dmmerge --undo U big.img <cut
[ $status = 1 ] || fail "the cut stream was applied"
cmp -s big.img b1 && fail "the cut stream wrote nothing; cannot test"
# the operator's rerun, cut again
head -c $((len * 6 / 10)) sb | dmmerge --undo U big.img 2>"$TMP/err2"
rerun=$?
run_status dmmerge --rollback U big.img
if [ $status = 0 ] && cmp -s big.img b1; then
	ok "after two failed --undo applies, rollback reaches the original"
else
	not_ok "rerun (exit $rerun: $(cat "$TMP/err2")); rollback exit" \
		"$status: the original is lost"
fi
run_status dmmerge --undo U big.img <sb
[ $status = 0 ] && cmp -s big.img b2 &&
	ok "after the rollback, --undo U is free for the next apply" ||
	not_ok "apply after rollback: exit $status, $(cat "$TMP/err")"

cp e1 rep.img
setstate 1
dmmerge --state state --undo V rep.img <s12 || fail "apply s12"
# and after a successful apply, too (the usual rotation)
run_status dmmerge --state state --undo V rep.img <s23
[ $status = 0 ] && cmp -s rep.img e3 &&
	ok "after a complete apply, --undo V is reused" ||
	not_ok "rotation: exit $status, $(cat "$TMP/err")"
# a file that is not an undo file is not overwritten
echo "precious" >notes.txt
run_status dmmerge --state state --undo notes.txt rep.img <s34
[ $status = 1 ] && grep -q precious notes.txt && cmp -s rep.img e3 &&
	ok "--undo does not overwrite a file that is not an undo file" ||
	not_ok "--undo notes.txt: exit $status, $(cat "$TMP/err")"

done_testing
