#!/bin/sh
# A dmsync in snapshot mode that is SIGKILLed mid-copy leaves its view
# device (NAME-view<pid>) and a frozen epoch whose snapshot keeps
# preserving overwritten blocks. The next dmsync, once it holds the
# device's lock, removes that view and says so; it leaves alone a device
# that only has a view's name and a view with another name; the replica
# it makes is identical to the source, and at the end the track device
# and its data device can be removed.
DSYNC_DEV_MB=32
. "$(dirname "$0")/dsync-lib.sh"
need_track
dmsetup targets | grep -q '^track-view ' ||
	skip_all "no track-view target: no snapshot mode"
setup
dmsync --all --state $STATE $NAME $DST 2>$T/err ||
	bail "seeding the replica: $(cat $T/err)"

# field N of the track target's status line (dm-track.rst, "Status")
tstatus() {
	dmsetup status $NAME | awk -v n="$1" '{ print $(3 + n) }'
}

# views of $NAME named as dmextract and dmsync name theirs
views() {
	dmsetup ls | awk -v p="^$NAME-view[0-9]+\$" '$1 ~ p { print $1 }'
}

# the slow receiver makes the 32 MiB copy take 26 s or more, so the sync
# is surely mid-copy when it is killed
slow_merge

dd if=/dev/urandom of=$SRC bs=1M count=$DEV_MB oflag=direct 2>/dev/null ||
	bail "writing the blocks to sync"
committed=$(status committed_epoch)
rm -f $T/mpid
dmsync --snapshot --dmmerge $T/slowmerge --state $STATE $NAME $DST \
	2>$T/err1 &
sync_pid=$!
wait_frozen
sleep 2
kill -0 $sync_pid 2>/dev/null || bail "dmsync ended before it could be killed"
kill -9 $sync_pid
wait $sync_pid
# the receiver sees a cut stream and exits
i=0
while [ -f $T/mpid ] && kill -0 "$(cat $T/mpid)" 2>/dev/null &&
	[ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done

view=$(views)
[ -n "$view" ] && dmsetup table $view | grep -q ' track-view ' &&
	ok "the killed dmsync left its view $view" ||
	not_ok "no view left by the killed dmsync: $(dmsetup ls | tr '\n' ' ')"
frozen=$(status frozen_epoch)
[ "$frozen" != 0 ] && [ "$(status committed_epoch)" = "$committed" ] &&
	[ "$(tstatus 11)" = active ] &&
	ok "its epoch $frozen stays frozen with an active snapshot" ||
	not_ok "after the kill: frozen $frozen, committed $(status committed_epoch), snapshot $(tstatus 11)"

# writes after the kill: the orphaned snapshot preserves what they overwrite
dd if=/dev/urandom of=$SRC bs=1M count=2 oflag=direct 2>/dev/null
dd if=/dev/urandom of=$SRC bs=1M count=1 seek=$((DEV_MB - 1)) oflag=direct \
	2>/dev/null
preserved=$(tstatus 12)
diag "the orphaned snapshot holds $preserved preserved bytes"
[ "${preserved:-0}" -gt 0 ] 2>/dev/null &&
	ok "the orphaned snapshot keeps preserving overwritten blocks" ||
	not_ok "preserved bytes after the kill: $preserved"

# not views of ours: one only named like one, one with another name
dmsetup create --noudevsync $NAME-view1 --table "0 8 zero" ||
	bail "a zero device named $NAME-view1"
dmsetup create --noudevsync --readonly other-view \
	--table "0 $((DEV_MB * 2048)) track-view $SRC" ||
	bail "a track-view of $NAME named other-view"

dmsync --state $STATE $NAME $DST 2>$T/err
rc=$?
sed 's/^/# dmsync: /' $T/err
[ $rc = 0 ] && ok "the next dmsync succeeds" || not_ok "the next dmsync exited $rc"
[ -n "$view" ] && ! dmsetup info $view >/dev/null 2>&1 &&
	ok "the leftover view $view is gone" ||
	not_ok "the leftover view is still there: $(views | tr '\n' ' ')"
[ -n "$view" ] && [ "$(grep -c "removed.*$view.*killed" $T/err)" = 1 ] &&
	ok "dmsync says in one line that it removed it, and why" ||
	not_ok "no line about removing $view"
dmsetup info $NAME-view1 >/dev/null 2>&1 && dmsetup info other-view \
	>/dev/null 2>&1 &&
	ok "a device only named like a view, and a view named otherwise, stay" ||
	not_ok "dmsync removed a device it did not make"
dmsetup remove --noudevsync $NAME-view1
dmsetup remove --noudevsync other-view
check "the replica is identical to the source" identical
[ "$(status frozen_epoch)" = 0 ] && [ "$(status dirty_active)" = 0 ] &&
	[ "$(tstatus 11)" = - ] &&
	ok "nothing is left frozen, dirty or preserved" ||
	not_ok "frozen $(status frozen_epoch), dirty $(status dirty_active), snapshot $(tstatus 11)"
dmsetup remove --noudevsync $NAME 2>$T/rm &&
	ok "the track device can be removed" ||
	not_ok "removing $NAME: $(cat $T/rm)"
dmsetup remove --noudevsync dsync-a 2>$T/rm &&
	ok "and so can its data device" ||
	not_ok "removing dsync-a: $(cat $T/rm)"

done_testing
