#!/bin/sh
# ext4 on a dm-track device, replicated to a second disk with
# dmextract | dmmerge: seeded with --all, then three incrementals after
# workloads. After each, the replica is byte-identical to the source and a
# clean ext4 with the same files, the epoch is committed, the state file
# follows it, and an incremental stream carries a fraction of the device.
. "$(dirname "$0")/dsync-lib.sh"
need_track
setup

mount $SRC $MNT || bail "mount $SRC"
workload w0 16
umount $MNT

xpipe --all || { xpipe_diag; bail "seeding with dmextract --all | dmmerge"; }
ok "seeding with --all succeeds"
check "the seeded replica is identical" identical
check "the seeded replica is a clean ext4 with the same files" \
	replica_fs_matches
size=$(blockdev --getsize64 $SRC 2>/dev/null || echo $((DEV_MB << 20)))

for i in 1 2 3; do
	committed=$(status committed_epoch)
	mount $SRC $MNT || bail "mount $SRC"
	workload w$i $((i * 2))
	umount $MNT
	dirty=$(status dirty_active)
	if ! xpipe; then
		xpipe_diag
		not_ok "incremental $i: dmextract | dmmerge"
		continue
	fi
	bytes=$(cat $T/stream-bytes)
	diag "incremental $i: $dirty dirty blocks, $bytes stream bytes of $size"
	check "incremental $i: the replica is identical" identical
	[ "$bytes" -lt $((size / 4)) ] &&
		ok "incremental $i sends a fraction of the device ($bytes bytes)" ||
		not_ok "incremental $i sends $bytes bytes of $size"
	new=$(status committed_epoch)
	[ "$new" -gt "$committed" ] && [ "$(status frozen_epoch)" = 0 ] &&
		ok "incremental $i: epoch $new is committed, nothing frozen" ||
		not_ok "incremental $i: committed $committed -> $new, frozen $(status frozen_epoch)"
	grep -q "^epoch $new\$" $STATE &&
		ok "incremental $i: the state file says epoch $new" ||
		not_ok "incremental $i: state file: $(grep epoch $STATE)"
done
check "after three incrementals the replica is a clean ext4 with the same files" \
	replica_fs_matches

# Nothing written since: an empty stream, still committed and accepted.
xpipe || xpipe_diag
[ "$xrc" = 0 ] && [ "$mrc" = 0 ] && [ "$(cat $T/stream-bytes)" -lt 1024 ] &&
	ok "with nothing dirty the stream is a header and an end record" ||
	not_ok "empty incremental: $xrc/$mrc, $(cat $T/stream-bytes) bytes"

# The replica refuses an old stream: replay the last incremental
mount $SRC $MNT && workload w4 1 && umount $MNT
dmextract --no-commit $NAME >$T/s4 2>$T/err || bail "dmextract --no-commit"
frozen=$(status frozen_epoch)
[ "$frozen" != 0 ] && ok "--no-commit leaves epoch $frozen frozen" ||
	not_ok "--no-commit left nothing frozen"
dmmerge --state $STATE $DST <$T/s4 2>$T/err || bail "applying s4"
dmtrack commit $NAME $frozen || not_ok "dmtrack commit $frozen"
dmmerge --state $STATE $DST <$T/s4 2>$T/err
[ $? = 1 ] && grep -q "roll blocks back" $T/err &&
	ok "the same stream applied twice is refused the second time" ||
	not_ok "replaying a stream: $(cat $T/err)"
check "and the replica is still identical" identical

done_testing
