#!/bin/sh
# dmsync commits an epoch only after the receiving dmmerge exited 0: through
# --rsh (a local stand-in for ssh) and to a local target, the replica ends
# identical and the epoch committed; when dmmerge refuses (wrong size) or
# fails, dmsync exits 1, the epoch is aborted and its blocks stay dirty.
. "$(dirname "$0")/dsync-lib.sh"
need_track
setup

# a remote shell that runs the command here, as ssh would on the host
cat >$T/rsh <<EOT
#!/bin/sh
while :; do
	case "\$1" in
	-o) shift 2 ;;
	-*) shift ;;
	*) break ;;
	esac
done
echo "\$1" >$T/rsh-host
shift
exec sh -c "\$*"
EOT
chmod +x $T/rsh

mount $SRC $MNT || bail "mount $SRC"
workload w0 8
umount $MNT

dmsync --rsh "$T/rsh -o BatchMode=yes" --all --state $STATE $NAME \
	backup:$DST 2>$T/err || bail "dmsync --all over --rsh: $(cat $T/err)"
[ "$(cat $T/rsh-host)" = backup ] && ok "dmsync --all over --rsh succeeds" ||
	not_ok "the remote shell was asked for '$(cat $T/rsh-host)'"
check "the seeded replica is identical" identical
[ "$(status frozen_epoch)" = 0 ] && [ "$(status committed_epoch)" != 0 ] &&
	ok "the seeding epoch is committed" ||
	not_ok "after seeding: frozen $(status frozen_epoch), committed $(status committed_epoch)"

for i in 1 2; do
	mount $SRC $MNT && workload w$i 3 && umount $MNT
	committed=$(status committed_epoch)
	dmsync -v --rsh $T/rsh --state $STATE $NAME backup:$DST 2>$T/err ||
		{ sed 's/^/# /' $T/err; not_ok "incremental dmsync $i"; continue; }
	check "incremental dmsync $i: the replica is identical" identical
	[ "$(status committed_epoch)" -gt "$committed" ] &&
		ok "incremental dmsync $i: the epoch is committed" ||
		not_ok "incremental dmsync $i: committed still $committed"
done

# failures: the receiver refuses, or cannot even start
mount $SRC $MNT && workload w3 2 && umount $MNT
committed=$(status committed_epoch)
dirty=$(status dirty_active)
dmsync --rsh $T/rsh --state $STATE $NAME backup:/dev/vdb 2>$T/err
rc=$?
[ $rc = 1 ] && grep -q "is 2147483648 bytes" $T/err &&
	ok "dmsync to a target of the wrong size fails with dmmerge's reason" ||
	not_ok "wrong-size target: exit $rc: $(cat $T/err)"
[ "$(status committed_epoch)" = "$committed" ] &&
	[ "$(status frozen_epoch)" = 0 ] &&
	[ "$(status dirty_active)" -ge "$dirty" ] &&
	ok "the refused epoch is aborted and its blocks stay dirty" ||
	not_ok "after the refusal: committed $(status committed_epoch), frozen $(status frozen_epoch), dirty $(status dirty_active)"
dmsync --dmmerge /bin/false --state $STATE $NAME $DST 2>$T/err
[ $? = 1 ] && [ "$(status committed_epoch)" = "$committed" ] &&
	[ "$(status frozen_epoch)" = 0 ] &&
	ok "a receiver that fails: exit 1, epoch aborted" ||
	not_ok "a failing receiver: $(cat $T/err)"

# and a local target picks everything up
dmsync --state $STATE $NAME $DST 2>$T/err ||
	{ sed 's/^/# /' $T/err; not_ok "dmsync to a local target"; }
check "dmsync to a local target makes the replica identical" identical
check "and a clean ext4 with the same files" replica_fs_matches
[ "$(status dirty_active)" = 0 ] && [ "$(status frozen_epoch)" = 0 ] &&
	ok "nothing is left dirty or frozen" ||
	not_ok "dirty $(status dirty_active), frozen $(status frozen_epoch)"

done_testing
