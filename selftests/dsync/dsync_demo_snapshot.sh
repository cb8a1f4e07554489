#!/bin/sh
# make demo: dmsync of a busy, mounted ext4 in snapshot mode. A writer
# creates, appends to and fsyncs files the whole time; each replica is
# checked as a backup would be restored: e2fsck -n, and mounted.
DSYNC_DEV_MB=32
. "$(dirname "$0")/dsync-lib.sh"
need_track
dmsetup targets | grep -q '^track-view ' ||
	skip_all "no track-view target: this dm-track has no snapshot mode"
COPY=/dev/mapper/dsync-c
WPID=
demo_cleanup() {
	[ -n "$WPID" ] && kill $WPID 2>/dev/null && wait $WPID 2>/dev/null
	fsfreeze --unfreeze $MNT 2>/dev/null
	umount $RMNT 2>/dev/null
	cleanup
	dmsetup remove --noudevsync dsync-c 2>/dev/null
}
setup
trap demo_cleanup EXIT
dmsetup create --noudevsync dsync-c \
	--table "0 $((DEV_MB * 2048)) linear /dev/vdd $((DEV_MB * 2048))" ||
	bail "the copy slice of /dev/vdd"
mount $SRC $MNT || bail "mount $SRC"

echo "snapshot demo: ext4 on dm-track $SRC ($DEV_MB MiB), mounted on $MNT"
echo "snapshot demo: seeding the replica $DST: dmsync --all --snapshot"
dmsync --all --snapshot --no-progress --state $STATE $NAME $DST 2>$T/err ||
	bail "seeding: $(cat $T/err)"

writer() {
	i=0
	while :; do
		mkdir -p $MNT/d$((i % 7)) || exit 1
		head -c $((4096 + i * 512 % 20000)) /dev/urandom \
			>$MNT/d$((i % 7))/f$i || exit 1
		sync $MNT/d$((i % 7))/f$i || exit 1
		o=$MNT/d$((i % 5))/f$((i / 2))
		if [ -f $o ]; then
			head -c 3000 /dev/urandom >>$o || exit 1
			sync $o || exit 1
		fi
		echo $i >$T/writer-count
		i=$((i + 1))
	done
}
writer 2>$T/writer-err &
WPID=$!
sleep 2
echo "snapshot demo: a writer is creating, appending to and fsyncing files"

# sync TITLE OPTIONS...
sync_once() {
	title=$1
	shift
	before=$(cat $T/writer-count 2>/dev/null || echo 0)
	t0=$(date +%s)
	echo "snapshot demo: $title: dmsync -v $* $NAME $DST"
	dmsync -v --no-progress "$@" --state $STATE $NAME $DST 2>$T/err ||
		bail "$title: dmsync failed: $(cat $T/err)"
	sed 's/^/  /' $T/err
	if grep -q "snapshot view failed" $T/err; then
		bail "$title: the snapshot view could not be made; dmsync copied the live device"
	fi
	after=$(cat $T/writer-count 2>/dev/null || echo 0)
	echo "  took $(($(date +%s) - t0)) s; the writer wrote $((after - before)) files meanwhile"
}

# 1. --snapshot --fsfreeze: the image is clean as it is.
sync_once "sync 1 (file-system clean)" --snapshot --fsfreeze $MNT
e2fsck -fn $DST >$T/fsck 2>&1
rc=$?
if [ $rc = 0 ]; then
	echo "  e2fsck -fn on the replica itself: clean"
	ok "sync 1: e2fsck -fn on the replica is clean, no journal to replay"
else
	sed 's/^/# /' $T/fsck | tail -n 5
	not_ok "sync 1: e2fsck -fn on the replica: exit $rc"
fi
if mount -o ro,noload $DST $RMNT 2>$T/err; then
	echo "  mount -o ro,noload: $(find $RMNT -type f | wc -l) files"
	umount $RMNT
	ok "sync 1: the replica mounts"
else
	not_ok "sync 1: the replica does not mount: $(cat $T/err)"
fi

# 2. --snapshot alone: crash-consistent; restore from a copy (mounting
# replays the journal, which a replica must never do to itself).
sync_once "sync 2 (crash-consistent)" --snapshot
dd if=$DST of=$COPY bs=1M 2>/dev/null || bail "copying the replica"
if mount $COPY $RMNT 2>$T/err; then
	echo "  a copy of the replica mounts (journal replayed): $(find $RMNT -type f | wc -l) files"
	umount $RMNT
	if e2fsck -fn $COPY >$T/fsck 2>&1; then
		echo "  e2fsck -fn after the replay: clean"
		ok "sync 2: the replica mounts and is clean after journal replay"
	else
		sed 's/^/# /' $T/fsck | tail -n 5
		not_ok "sync 2: e2fsck -fn after the replay failed"
	fi
else
	not_ok "sync 2: a copy of the replica does not mount: $(cat $T/err)"
fi

kill -0 $WPID 2>/dev/null && ok "the writer never failed" ||
	not_ok "the writer stopped: $(cat $T/writer-err)"
kill $WPID
wait $WPID 2>/dev/null
WPID=
umount $MNT
done_testing
