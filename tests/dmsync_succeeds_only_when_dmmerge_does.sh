#!/bin/bash
# dmsync runs dmmerge itself (through --rsh, or locally), and reports
# success only when dmmerge applied the whole stream: a receiver that fails,
# exits early, cannot be started or is killed makes dmsync exit 1.
# (The commit and abort of dm-track epochs are tested in the VM.)
# timeout: 120
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/dsync_lib.sh"
need_tools
[ -x "$BUILD/bin/dmsync" ] || skip_all "build/bin/dmsync is not built"

cd "$TMP" || exit 1
# A remote shell that runs the command here, as ssh would on the host, and
# records its options and the host it was asked for.
cat >rsh <<EOF2
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do echo "\$1" >>"$TMP/rsh-opts"; shift; done
echo "\$1" >"$TMP/rsh-host"
shift
PATH="$BUILD/bin:\$PATH" exec sh -c "\$*"
EOF2
chmod +x rsh

mkimg src 16
cp src "dst with 'quotes' and spaces"
cp src dst
scribble src 300 1 >dirty

run_status dmsync --rsh "$TMP/rsh -x" --dirty dirty --device src \
	"backup@host1:$TMP/dst with 'quotes' and spaces"
[ $status = 0 ] && cmp -s src "dst with 'quotes' and spaces" &&
	[ "$(cat rsh-host)" = "backup@host1" ] && [ "$(cat rsh-opts)" = "-x" ] &&
	ok "dmsync over --rsh makes the remote replica identical" ||
	not_ok "dmsync over --rsh ($status: $(cat "$TMP/err"))"

run_status dmsync --dirty dirty --device src dst
[ $status = 0 ] && cmp -s src dst &&
	ok "dmsync to a local path makes the replica identical" ||
	not_ok "dmsync to a local path ($status: $(cat "$TMP/err"))"

run_status dmsync --rsh "$TMP/rsh" --state "$TMP/state" --new-epoch 3 \
	--all --device src --source-id s "host:$TMP/dst"
[ $status = 0 ] && grep -q '^epoch 3$' state &&
	ok "--state reaches the remote dmmerge" ||
	not_ok "--state reaches the remote dmmerge ($status: $(cat "$TMP/err"))"

run_status dmsync --rsh "$TMP/rsh" --state "$TMP/state" --base-epoch 1 \
	--new-epoch 2 --dirty dirty --device src --source-id s "host:$TMP/dst"
[ $status = 1 ] && grep -q "dmmerge on host failed" "$TMP/err" &&
	ok "a stream the remote dmmerge refuses makes dmsync fail" ||
	not_ok "refused remotely ($status: $(cat "$TMP/err"))"

run_status dmsync --rsh "$TMP/rsh" --dirty dirty --device src \
	"host:$TMP/no/such/dir/dst"
[ $status = 1 ] && grep -q "does not exist" "$TMP/err" &&
	ok "a missing remote target makes dmsync fail, with dmmerge's reason" ||
	not_ok "missing remote target ($status: $(cat "$TMP/err"))"

run_status dmsync --dmmerge /bin/true --all --device src dst
[ $status = 1 ] &&
	ok "a receiver that exits 0 without reading the stream is a failure" ||
	not_ok "a receiver that exits 0 early ($status: $(cat "$TMP/err"))"

run_status dmsync --dmmerge "$TMP/no-such-dmmerge" --all --device src dst
[ $status = 1 ] && grep -q "cannot run" "$TMP/err" &&
	ok "a receiver that cannot be started is a failure" ||
	not_ok "a receiver that cannot be started ($status: $(cat "$TMP/err"))"

run_status dmsync --rsh "$TMP/no-such-ssh" --all --device src host:dst
[ $status = 1 ] &&
	ok "a remote shell that cannot be started is a failure" ||
	not_ok "a remote shell that cannot be started ($status)"

cat >killer <<'EOF2'
#!/bin/sh
head -c 100000 >/dev/null
kill -9 $$
EOF2
chmod +x killer
run_status dmsync --dmmerge "$TMP/killer" --all --device src dst
[ $status = 1 ] && grep -q "killed by signal 9" "$TMP/err" &&
	ok "a receiver killed mid-stream is a failure" ||
	not_ok "a receiver killed mid-stream ($status: $(cat "$TMP/err"))"

# SIGTERM to dmsync mid-stream: it stops, the receiver sees a cut stream
cat >slow <<EOF2
#!/bin/sh
# a receiver that reads slowly
while dd bs=64k count=1 status=none >/dev/null; do sleep 0.05; done
EOF2
chmod +x slow
mkimg big 64
dmsync --dmmerge "$TMP/slow" --all --device big dst 2>"$TMP/err" &
pid=$!
sleep 1
kill -TERM $pid
wait $pid
status=$?
[ $status = 1 ] && grep -q "interrupted by signal 15" "$TMP/err" &&
	ok "SIGTERM stops dmsync with a failure" ||
	not_ok "SIGTERM ($status: $(cat "$TMP/err"))"

done_testing
