#!/bin/sh
# Syncs that die half-way lose nothing: when the consumer of the stream
# goes away, when dmmerge stops on a cut stream, when dmmerge is killed,
# when dmextract gets SIGTERM, dmextract exits 1 and aborts its epoch (the
# blocks stay dirty); when dmextract is SIGKILLed its epoch stays frozen and
# the next freeze merges it. After all of that, one ordinary sync makes the
# replica identical.
. "$(dirname "$0")/dsync-lib.sh"
need_track
setup

mount $SRC $MNT || bail "mount $SRC"
workload w0 8
umount $MNT
xpipe --all || { xpipe_diag; bail "seeding"; }

# dirty a lot, so that the streams below take a while
mount $SRC $MNT || bail "mount $SRC"
workload w1 32
umount $MNT
dirty=$(status dirty_active)
committed=$(status committed_epoch)
diag "$dirty blocks dirty, committed epoch $committed"

# aborted STEP: the epoch was given back, nothing was committed, and at
# least the blocks dirty before are dirty again
aborted() {
	if [ "$(status frozen_epoch)" = 0 ] &&
		[ "$(status committed_epoch)" = "$committed" ] &&
		[ "$(status dirty_active)" -ge "$dirty" ]; then
		ok "$1: the epoch is aborted, its blocks are dirty again"
	else
		not_ok "$1: frozen $(status frozen_epoch), committed $(status committed_epoch), dirty $(status dirty_active) (was $dirty)"
	fi
}

# 1. the consumer reads 1 MB and exits
{ dmextract $NAME 2>$T/err; echo $? >$T/rc; } | head -c 1000000 >/dev/null
[ "$(cat $T/rc)" = 1 ] && grep -q "closed" $T/err &&
	ok "a consumer that goes away makes dmextract fail" ||
	not_ok "consumer gone: exit $(cat $T/rc): $(cat $T/err)"
aborted "consumer gone"

# 2. dmmerge gets a cut stream: it stops (exit 1), dmextract aborts
xpipe_cut() {
	{ dmextract $NAME 2>$T/x.err; echo $? >$T/x.rc; } |
		head -c 3000000 |
		{ dmmerge --state $STATE $DST 2>$T/m.err; echo $? >$T/m.rc; }
}
xpipe_cut
[ "$(cat $T/x.rc)" = 1 ] && [ "$(cat $T/m.rc)" = 1 ] &&
	grep -q "truncated" $T/m.err &&
	ok "a cut stream: dmmerge refuses the rest, dmextract fails" ||
	not_ok "cut stream: dmextract $(cat $T/x.rc), dmmerge $(cat $T/m.rc): $(cat $T/m.err)"
aborted "cut stream"

# 3. dmmerge is killed in the middle of the stream (after 2 MB)
mkfifo $T/fifo
dmextract $NAME >$T/fifo 2>$T/err &
xpid=$!
{ head -c 2000000; sleep 5; cat; } <$T/fifo 2>/dev/null |
	sh -c "echo \$\$ >$T/mpid; exec dmmerge --state $STATE $DST" \
	2>/dev/null &
sleep 3
kill -9 "$(cat $T/mpid)"
wait $xpid
xrc=$?
wait
rm -f $T/fifo
[ $xrc = 1 ] && ok "dmmerge killed: dmextract fails" ||
	not_ok "dmmerge killed: dmextract exit $xrc"
aborted "dmmerge killed"

# 4. dmextract gets SIGTERM while the consumer is slow
mkfifo $T/fifo
dmextract $NAME >$T/fifo 2>$T/err &
xpid=$!
(sleep 2; cat >/dev/null) <$T/fifo &
cpid=$!
sleep 1
kill -TERM $xpid
wait $xpid
xrc=$?
wait $cpid
rm -f $T/fifo
[ $xrc = 1 ] && grep -q "signal 15" $T/err &&
	ok "SIGTERM: dmextract fails and says why" ||
	not_ok "SIGTERM: exit $xrc: $(cat $T/err)"
aborted "SIGTERM"

# 5. dmextract is SIGKILLed: the epoch stays frozen
mkfifo $T/fifo
dmextract $NAME >$T/fifo 2>/dev/null &
xpid=$!
(sleep 2; cat >/dev/null) <$T/fifo &
cpid=$!
sleep 1
kill -9 $xpid
wait $xpid
wait $cpid
rm -f $T/fifo
frozen=$(status frozen_epoch)
[ "$frozen" != 0 ] && ok "SIGKILL: epoch $frozen stays frozen" ||
	not_ok "SIGKILL: nothing frozen"

# more writes, then one normal sync gets everything
mount $SRC $MNT || bail "mount $SRC"
workload w2 2
umount $MNT
xpipe || { xpipe_diag; bail "the sync after the failures"; }
ok "the next sync merges the frozen epoch and succeeds"
check "the replica is identical after all the failed syncs" identical
check "and is a clean ext4 with the same files" replica_fs_matches
[ "$(status frozen_epoch)" = 0 ] && [ "$(status dirty_active)" = 0 ] &&
	ok "nothing is left frozen or dirty" ||
	not_ok "frozen $(status frozen_epoch), dirty $(status dirty_active)"

done_testing
