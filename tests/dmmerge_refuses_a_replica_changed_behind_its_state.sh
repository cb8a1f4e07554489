#!/bin/bash
# dmmerge --state keeps a fingerprint of what the last apply left on the
# replica (its first MiB, where filesystems keep the superblock a mount
# writes, and the blocks it wrote); an incremental stream onto a replica
# changed since (a mount replaying a journal, tune2fs, a stray write) is
# refused, with the changed blocks listed for sending again, instead of
# leaving them wrong under a state file that calls the replica current.
# dmmerge's own writes (a failed apply, a rollback) are not taken for
# someone else's.
# timeout: 120
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/dsync_lib.sh"
need_tools
command -v mkfs.ext4 >/dev/null && command -v tune2fs >/dev/null ||
	skip_all "e2fsprogs is missing"

cd "$TMP" || exit 1
mkimg e1 8
mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0 e1 || fail "mkfs.ext4"
cp e1 e2
scribble e2 50 1 >d12
cp e2 e3
scribble e3 50 2 >d23
x() { dmextract --source-id vm1 --no-progress "$@" || fail "dmextract $*"; }
x --all --device e1 --new-epoch 1 -o full1
x --dirty d12 --device e2 --base-epoch 1 --new-epoch 2 -o s12
x --dirty d23 --device e3 --base-epoch 2 --new-epoch 3 -o s23
x --all --device e3 --new-epoch 3 -o full3

dmmerge --state state rep.img <full1 || fail "seed"
dmmerge --state state rep.img <s12 || fail "apply 1->2"
grep -q '^fingerprint ' state &&
	ok "the state file holds a fingerprint of the replica" ||
	not_ok "no fingerprint in the state file: $(cat state)"

# tune2fs rewrites the superblock, as a mount does
cp state state.before
tune2fs -c 17 rep.img >/dev/null || fail "tune2fs"
cp rep.img rep.before
run_status dmmerge --state state rep.img <s23
if [ $status = 1 ] && cmp -s rep.img rep.before &&
	cmp -s state state.before && grep -q "modified outside" "$TMP/err" &&
	grep -q -- "--all" "$TMP/err" && grep -q '^0-' state.changed; then
	ok "a superblock changed by tune2fs: the stream is refused"
else
	not_ok "after tune2fs: exit $status, $(cat "$TMP/err")"
fi

# a block the last apply wrote, changed
cp state.before state
cp e2 rep.img
b=$(sed -n 40p d12)
dd if=/dev/urandom of=rep.img bs=4096 seek="$b" count=1 conv=notrunc \
	status=none
run_status dmmerge --state state rep.img <s23
[ $status = 1 ] && grep -q "^$b-$b\$\|blocks $b-$b" state.changed "$TMP/err" &&
	ok "block $b, written by the last apply and changed: refused, named" ||
	not_ok "block $b changed: exit $status, $(cat "$TMP/err")"

# --force applies, and says so; a full stream needs no fingerprint
cp state.before state
run_status dmmerge --force --state state rep.img <s23
[ $status = 0 ] && grep -q "modified outside" "$TMP/err" &&
	ok "--force applies anyway and says what it overrode" ||
	not_ok "--force: exit $status, $(cat "$TMP/err")"
cp state.before state
tune2fs -c 19 rep.img >/dev/null
run_status dmmerge --state state rep.img <full3
[ $status = 0 ] && cmp -s rep.img e3 &&
	ok "a full stream repairs a modified replica" ||
	not_ok "full stream: exit $status, $(cat "$TMP/err")"

# dmmerge's own writes are not someone else's
dmmerge --state state rep.img <full1 2>/dev/null || fail "reseed"
dmmerge --state state rep.img <s12 || fail "apply 1->2 again"
len=$(stat -c %s s23)
head -c $((len / 2)) s23 | dmmerge --state state rep.img 2>/dev/null
run_status dmmerge --state state rep.img <s23
[ $status = 0 ] && cmp -s rep.img e3 &&
	ok "after a failed apply, running it again is accepted" ||
	not_ok "rerun after a failed apply: exit $status, $(cat "$TMP/err")"
dmmerge --state state rep.img <full1 2>/dev/null || fail "reseed"
dmmerge --state state --undo U rep.img <s12 || fail "apply with undo"
dmmerge --rollback U --state state rep.img 2>/dev/null || fail "rollback"
run_status dmmerge --state state rep.img <s12
[ $status = 0 ] && cmp -s rep.img e2 &&
	ok "after a rollback, the stream applies again" ||
	not_ok "after a rollback: exit $status, $(cat "$TMP/err")"

done_testing
