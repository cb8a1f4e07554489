#!/bin/sh
# A busy ext4 on a dm-track device, synced with dmsync while a writer
# creates, appends to and fsyncs files, and (if sqlite3 is in the VM) a
# second writer commits SQLite transactions. After each sync a copy of the
# replica (mounting replays the journal, so never the replica itself) is
# checked with e2fsck -fn and, once mounted, PRAGMA integrity_check:
#   --fsfreeze (snapshot mode): clean as it is, no journal to replay;
#   snapshot mode: clean once its journal is replayed (crash-consistent);
#   both: the database passes its integrity check;
#   --no-snapshot: the replica mixes instants; how often it is damaged is
#   printed as a diag, not asserted (it need not fail every time).
# Also: --fsfreeze refuses a file system that is already frozen or that
# cannot be frozen, with nothing frozen, and the writers never fail.
DSYNC_DEV_MB=32
. "$(dirname "$0")/dsync-lib.sh"
need_track
COPY=/dev/mapper/dsync-c
ROUNDS=3
WPID=
SPID=
churn_cleanup() {
	[ -n "$WPID" ] && kill $WPID 2>/dev/null && wait $WPID 2>/dev/null
	[ -n "$SPID" ] && touch $T/sqlite-stop && wait $SPID 2>/dev/null
	fsfreeze --unfreeze $MNT 2>/dev/null
	umount /mnt/dsync-copy 2>/dev/null
	cleanup
	dmsetup remove --noudevsync dsync-c 2>/dev/null
}
setup
trap churn_cleanup EXIT
dmsetup create --noudevsync dsync-c \
	--table "0 $((DEV_MB * 2048)) linear /dev/vdd $((DEV_MB * 2048))" ||
	bail "the copy slice of /dev/vdd"
mkdir -p /mnt/dsync-copy
mount $SRC $MNT || bail "mount $SRC"
dmsync --all --no-progress --no-snapshot --state $STATE $NAME $DST 2>$T/err ||
	bail "seeding with dmsync --all: $(cat $T/err)"

# The writer: a new file, an append to an older one, each fsynced.
writer() {
	i=0
	while :; do
		mkdir -p $MNT/d$((i % 7)) || exit 1
		f=$MNT/d$((i % 7))/f$i
		head -c $((4096 + i * 512 % 20000)) /dev/urandom >$f || exit 1
		sync $f || exit 1
		o=$MNT/d$((i % 5))/f$((i / 2))
		if [ -f $o ]; then
			head -c 3000 /dev/urandom >>$o || exit 1
			sync $o || exit 1
		fi
		[ $((i % 50)) = 49 ] && rm -f $MNT/d$((i % 7))/f$((i - 40))
		i=$((i + 1))
	done
}
writer 2>$T/writer-err &
WPID=$!

# The database writer: one sqlite3 (rollback journal, synchronous=FULL:
# an fsync per commit) fed transactions that insert, update and delete,
# until $T/sqlite-stop exists (then sqlite3 reads its end of input).
DB=db.sqlite
sqlwriter() {
	echo "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, n INT, v BLOB);"
	echo "CREATE INDEX IF NOT EXISTS tn ON t(n);"
	i=0
	while [ ! -e $T/sqlite-stop ]; do
		echo "BEGIN; INSERT INTO t(n, v) VALUES($i, randomblob(2000));"
		echo "UPDATE t SET v = randomblob(1500) WHERE n % 37 = $((i % 37));"
		echo "DELETE FROM t WHERE n < $((i - 300)); COMMIT;"
		i=$((i + 1))
	done
}
HAVE_SQLITE=0
if command -v sqlite3 >/dev/null; then
	HAVE_SQLITE=1
	{ sqlwriter | sqlite3 -bail $MNT/$DB; echo $? >$T/sqlite-rc; } \
		2>$T/sqlite-err &
	SPID=$!
else
	diag "sqlite3 is not in the VM: no database writer"
fi
sleep 2

# check_copy: copy the replica; $pre = e2fsck -fn before any journal
# replay, $post = after a mount (which replays it) and umount, $db =
# PRAGMA integrity_check of the database on the mounted copy ("ok", or
# what it said; "-" without sqlite3)
check_copy() {
	dd if=$DST of=$COPY bs=1M 2>/dev/null || bail "copying the replica"
	e2fsck -fn $COPY >$T/fsck-pre 2>&1
	pre=$?
	db=-
	if mount $COPY /mnt/dsync-copy 2>$T/mount-err; then
		if [ $HAVE_SQLITE = 1 ]; then
			if [ -f /mnt/dsync-copy/$DB ]; then
				db=$(sqlite3 /mnt/dsync-copy/$DB \
					"PRAGMA integrity_check; SELECT count(*) FROM t;" 2>&1 |
					tr '\n' ' ')
				rows=$(echo ${db#ok })
				case "$db" in "ok "[0-9]*) db=ok ;; esac
			else
				db="no database file"
			fi
		fi
		umount /mnt/dsync-copy
		e2fsck -fn $COPY >$T/fsck-post 2>&1
		post=$?
	else
		post=mount
	fi
}

for mode in fsfreeze snapshot fsfreeze-live no-snapshot; do
	case $mode in
	fsfreeze) opts="--snapshot --fsfreeze $MNT" ;;
	fsfreeze-live) opts="--no-snapshot --fsfreeze $MNT" ;;
	snapshot) opts=--snapshot ;;
	no-snapshot) opts=--no-snapshot ;;
	esac
	bad=0
	r=1
	while [ $r -le $ROUNDS ]; do
		sleep 1
		# shellcheck disable=SC2086
		if ! dmsync --no-progress $opts --state $STATE $NAME $DST \
			2>$T/err; then
			not_ok "$mode round $r: dmsync failed: $(cat $T/err)"
			r=$((r + 1))
			continue
		fi
		check_copy
		case $mode in
		fsfreeze)
			[ $pre = 0 ] && [ $post = 0 ] &&
				ok "$mode round $r: the replica is a clean ext4 without journal replay, and mounts" ||
				{ sed 's/^/# /' $T/fsck-pre | tail -n 5
				  not_ok "$mode round $r: e2fsck $pre, after mount $post"; } ;;
		snapshot)
			[ $post = 0 ] &&
				ok "$mode round $r: the replica mounts and is clean after journal replay (e2fsck before: $pre)" ||
				{ sed 's/^/# /' $T/fsck-post | tail -n 5
				  not_ok "$mode round $r: after mount: $post"; } ;;
		fsfreeze-live|no-snapshot)
			[ "$post" = 0 ] && [ "$db" = ok -o "$db" = - ] ||
				bad=$((bad + 1))
			diag "$mode round $r: e2fsck -fn before replay $pre, after mount+replay $post, database: $db" ;;
		esac
		case $mode in fsfreeze|snapshot)
			[ $HAVE_SQLITE = 0 ] ||
			{ [ "$db" = ok ] &&
				ok "$mode round $r: the replica's database passes PRAGMA integrity_check ($rows rows)" ||
				not_ok "$mode round $r: the replica's database: $db"; } ;;
		esac
		r=$((r + 1))
	done
	case $mode in fsfreeze-live|no-snapshot)
		diag "$mode (WITHOUT snapshot mode): $bad of $ROUNDS replicas failed to mount, e2fsck after journal replay or PRAGMA integrity_check"
		[ $mode = fsfreeze-live ] &&
			ok "$mode: $ROUNDS syncs with --fsfreeze froze and thawed the busy file system" ;;
	esac
done

kill -0 $WPID 2>/dev/null && ok "the writer ran through every sync without an error" ||
	not_ok "the writer stopped: $(cat $T/writer-err)"
kill $WPID; wait $WPID 2>/dev/null; WPID=
if [ $HAVE_SQLITE = 1 ]; then
	early=$(cat $T/sqlite-rc 2>/dev/null)
	touch $T/sqlite-stop
	wait $SPID
	SPID=
	[ -z "$early" ] && [ "$(cat $T/sqlite-rc)" = 0 ] &&
		ok "the database writer ran through every sync without an error" ||
		not_ok "the database writer stopped (exit $(cat $T/sqlite-rc)): $(cat $T/sqlite-err)"
fi

# Refusals: nothing is frozen after them.
if command -v fsfreeze >/dev/null; then
	fsfreeze --freeze $MNT
	dmsync --no-progress --no-snapshot --fsfreeze $MNT --state $STATE $NAME $DST \
		2>$T/err
	rc=$?
	fsfreeze --unfreeze $MNT
	[ $rc = 1 ] && grep -q "already frozen" $T/err &&
		[ "$(status frozen_epoch)" = 0 ] &&
		ok "--fsfreeze on a frozen file system: refused, nothing frozen" ||
		not_ok "--fsfreeze on a frozen file system: exit $rc, frozen $(status frozen_epoch): $(cat $T/err)"
fi
dmsync --no-progress --no-snapshot --fsfreeze /proc --state $STATE $NAME $DST 2>$T/err
rc=$?
[ $rc = 1 ] && grep -q "cannot be frozen" $T/err &&
	[ "$(status frozen_epoch)" = 0 ] &&
	ok "--fsfreeze on a file system without FIFREEZE: refused, nothing frozen" ||
	not_ok "--fsfreeze /proc: exit $rc, frozen $(status frozen_epoch): $(cat $T/err)"
echo x >$MNT/after && sync $MNT/after &&
	ok "the file system is writable after the refusals" ||
	not_ok "the file system is not writable after the refusals"
umount $MNT
done_testing
