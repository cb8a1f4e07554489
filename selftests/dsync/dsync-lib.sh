# Helpers for the dsync VM tests (sourced; busybox sh).
#
# The source is a dm-track device $NAME over the first $DEV_MB MiB of
# /dev/vdc, the replica the first $DEV_MB MiB of /dev/vdd (dm-linear slices:
# what is proven does not depend on the size, and under TCG every copy and
# comparison of the whole device costs seconds). A test that wants more
# sets DSYNC_DEV_MB before sourcing this (at most 256). Output is TAP; a
# test without dm-track exits 4 (KSFT_SKIP).

DEV_MB=${DSYNC_DEV_MB:-64}
NAME=dsync-src
SRC=/dev/mapper/$NAME
SRC_DISK=/dev/mapper/dsync-a
DST=/dev/mapper/dsync-b
MNT=/mnt/dsync-src
RMNT=/mnt/dsync-dst
T=/tmp/dsync.$$
STATE=$T/state

_n=0
_failed=0

ok() {
	_n=$((_n + 1))
	echo "ok $_n - $*"
}

not_ok() {
	_n=$((_n + 1))
	_failed=$((_failed + 1))
	echo "not ok $_n - $*"
}

# check NAME CMD...: ok if CMD exits 0
check() {
	_name=$1
	shift
	if "$@"; then ok "$_name"; else not_ok "$_name"; fi
}

diag() {
	echo "# $*"
}

skip_all() {
	echo "1..0 # SKIP $*"
	exit 4
}

cleanup() {
	cd /
	umount $MNT 2>/dev/null
	umount $RMNT 2>/dev/null
	# views (and a decoy named like one) first: a view holds dsync-a open
	for _v in $(dmsetup ls --target track-view 2>/dev/null |
		awk '$2 ~ /^\(/ { print $1 }') $NAME-view1; do
		dmsetup remove --noudevsync $_v 2>/dev/null
	done
	dmsetup remove --noudevsync $NAME 2>/dev/null
	dmsetup remove --noudevsync dsync-a 2>/dev/null
	dmsetup remove --noudevsync dsync-b 2>/dev/null
	dmsetup remove --noudevsync dsync-cow 2>/dev/null
	rm -rf $T
}

done_testing() {
	echo "1..$_n"
	cleanup
	trap - EXIT
	[ $_failed = 0 ] && exit 0
	exit 1
}

# bail REASON: a step the rest depends on failed
bail() {
	not_ok "$*"
	[ -f $T/err ] && sed 's/^/# /' $T/err
	done_testing
}

need_track() {
	dmsetup targets 2>/dev/null | grep -q '^track ' ||
		skip_all "no dm-track target ('dmsetup targets' has no track)"
	for t in dmextract dmmerge dmsync dmtrack mkfs.ext4 e2fsck cmp; do
		command -v $t >/dev/null || skip_all "$t is not installed"
	done
}

# setup [FS_SIZE]: a fresh dm-track device with ext4 on it (on the whole
# device, or its first FS_SIZE), and a replica whose start is blank.
setup() {
	trap cleanup EXIT
	cleanup
	mkdir -p $T $MNT $RMNT
	dmsetup create --noudevsync dsync-a \
		--table "0 $((DEV_MB * 2048)) linear /dev/vdc 0" &&
		dmsetup create --noudevsync dsync-b \
			--table "0 $((DEV_MB * 2048)) linear /dev/vdd 0" ||
		bail "the $DEV_MB MiB slices of /dev/vdc and /dev/vdd"
	dd if=/dev/zero of=$DST bs=1M count=8 2>/dev/null
	dmtrack create $NAME $SRC_DISK 2>$T/err || bail "dmtrack create"
	mkfs.ext4 -q -F $SRC $1 >$T/err 2>&1 || bail "mkfs.ext4 on $SRC"
}

# status FIELD: a field of 'dmtrack status --json'
status() {
	dmtrack status $NAME --json |
		sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"
}

# slow_merge: $T/slowmerge, a dmmerge whose stream arrives at most 64 KiB
# every 50 ms (dd reads no more than it writes out, where head may read
# ahead and drop the rest), so a sync is surely mid-copy for a while; the
# receiver's pid goes to $T/mpid
slow_merge() {
	cat >$T/slowmerge <<EOT
#!/bin/sh
echo \$\$ >$T/mpid
{
	while dd bs=65536 count=1 of=$T/chunk 2>/dev/null && [ -s $T/chunk ]; do
		cat $T/chunk
		sleep 0.05
	done
} | exec dmmerge "\$@"
EOT
	chmod +x $T/slowmerge
}

# wait_frozen: until $NAME has a frozen epoch, 30 s at most
wait_frozen() {
	_i=0
	while [ "$(status frozen_epoch)" = 0 ] && [ $_i -lt 300 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
}

# workload TAG MIB: write MIB MiB of new files, change older files in
# place, delete one, sync
workload() {
	_i=0
	mkdir -p $MNT/$1
	while [ $_i -lt $2 ]; do
		dd if=/dev/urandom of=$MNT/$1/f$_i bs=64k count=16 2>/dev/null
		_i=$((_i + 1))
	done
	for _f in $MNT/*/f1; do
		dd if=/dev/urandom of=$_f bs=4k count=3 seek=7 conv=notrunc \
			2>/dev/null
	done
	rm -f $MNT/$1/f0
	sync
}

# xpipe [dmextract options] -- [dmmerge options]: dmextract NAME | dmmerge
# --state $STATE $DST; $xrc and $mrc get the exit codes, $T/stream-bytes
# the bytes that went through the pipe
xpipe() {
	_x=""
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do
		_x="$_x $1"
		shift
	done
	[ "$1" = "--" ] && shift
	{ dmextract $_x $NAME 2>$T/x.err; echo $? >$T/x.rc; } |
		{ tee $T/stream | dmmerge --state $STATE "$@" $DST \
			2>$T/m.err; echo $? >$T/m.rc; }
	xrc=$(cat $T/x.rc)
	mrc=$(cat $T/m.rc)
	wc -c <$T/stream >$T/stream-bytes
	rm -f $T/stream
	[ "$xrc" = 0 ] && [ "$mrc" = 0 ]
}

# show the messages of the last xpipe
xpipe_diag() {
	sed 's/^/# dmextract: /' $T/x.err
	sed 's/^/# dmmerge: /' $T/m.err
}

identical() {
	cmp $SRC $DST >$T/cmp 2>&1 && return 0
	sed 's/^/# /' $T/cmp
	return 1
}

# The replica holds a clean ext4 whose files match the source's.
replica_fs_matches() {
	e2fsck -fn $DST >$T/fsck 2>&1 || {
		sed 's/^/# /' $T/fsck | tail -n 5
		return 1
	}
	mount -o ro $DST $RMNT || return 1
	mount -o ro $SRC $MNT || { umount $RMNT; return 1; }
	(cd $MNT && find . -type f | sort | xargs md5sum) >$T/a
	(cd $RMNT && find . -type f | sort | xargs md5sum) >$T/b
	umount $MNT
	umount $RMNT
	cmp -s $T/a $T/b
}
