#!/bin/bash
# dsync over a real OpenSSH: sshd from Debian's openssh-server in a network
# namespace the test creates, reached over a veth pair limited to
# 100 Mbit/s (tc tbf), with a key pair the test makes. dmsync and the
# plain `dmextract | ssh host dmmerge` pipe seed and update a replica; a
# connection cut mid-stream (the server-side sshd session killed) leaves
# a replica that --rollback restores exactly, a state file at the old
# epoch, and a rerun that converges. -z against plain is measured (wire
# bytes and seconds, printed as diagnostics; figures in docs/dsync.md).
# timeout: 300
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/dsync_lib.sh"
need_tools
[ "$(id -u)" = 0 ] || skip_all "needs root (network namespace, sshd)"
[ -x /usr/sbin/sshd ] || skip_all "sshd is missing (openssh-server)"
command -v ssh >/dev/null && command -v ip >/dev/null &&
	command -v tc >/dev/null || skip_all "ssh, ip or tc is missing"

ns=lt-dsync-$$
va=ltd$$a
vb=ltd$$b
net=10.$((200 + $$ % 50)).$(($$ % 250)).
cleanup() {
	[ -s "$TMP/sshd.pid" ] && kill "$(cat "$TMP/sshd.pid")" 2>/dev/null
	ip link del "$va" 2>/dev/null
	ip netns del "$ns" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
ip netns add "$ns" || skip_all "cannot create a network namespace"
ip link add "$va" type veth peer name "$vb" netns "$ns" ||
	skip_all "cannot create a veth pair"
ip addr add "${net}1/24" dev "$va"
ip link set "$va" up
ip -n "$ns" addr add "${net}2/24" dev "$vb"
ip -n "$ns" link set "$vb" up
ip -n "$ns" link set lo up
for dev in "$va" "ns:$vb"; do
	if [ "${dev#ns:}" != "$dev" ]; then
		ip netns exec "$ns" tc qdisc add dev "${dev#ns:}" root tbf \
			rate 100mbit burst 64kb latency 100ms
	else
		tc qdisc add dev "$dev" root tbf rate 100mbit burst 64kb \
			latency 100ms
	fi || skip_all "tc tbf is not available"
done

cd "$TMP" || exit 1
ssh-keygen -q -t ed25519 -N '' -f hostkey || fail "ssh-keygen host"
ssh-keygen -q -t ed25519 -N '' -f id || fail "ssh-keygen user"
cp id.pub authorized_keys
cat >sshd_config <<CONF
Port 2222
ListenAddress ${net}2
HostKey $TMP/hostkey
AuthorizedKeysFile $TMP/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
PidFile $TMP/sshd.pid
CONF
mkdir -p /run/sshd
ip netns exec "$ns" /usr/sbin/sshd -f sshd_config -E "$TMP/sshd.log" ||
	fail "sshd did not start: $(cat sshd.log)"
host=${net}2
rsh="ssh -F /dev/null -i $TMP/id -p 2222 -o BatchMode=yes -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR"
for _ in $(seq 50); do
	$rsh "$host" true 2>/dev/null && break
	sleep 0.2
done
$rsh "$host" true || fail "ssh to sshd in the namespace does not work"
ok "ssh with the test's key reaches sshd in namespace $ns"

# source: 48 MiB, half random, half text (compressible)
mkimg src 24
$PY -c '
import sys
w = sys.stdout.buffer
line = b"2026-11-24 04:00:00 INFO request served in 12 ms from cache\n"
w.write((line * (24 * 1024 * 1024 // len(line) + 1))[:24 * 1024 * 1024])
' >>src
cp src mixed
dms() { dmsync --rsh "$rsh" --dmmerge "$BUILD/bin/dmmerge" --no-progress \
	--source-id vm1 "$@"; }

# seed
run_status dms --all --device src --new-epoch 1 --state "$TMP/state" \
	"$host:$TMP/rep.img"
[ $status = 0 ] && cmp -s src rep.img &&
	ok "dmsync --all over ssh seeds the replica" ||
	not_ok "seed over ssh: exit $status, $(cat "$TMP/err")"

# incremental with dmsync, then with the plain pipe
cp src src1
scribble src 300 1 >d12
run_status dms --dirty d12 --device src --base-epoch 1 --new-epoch 2 \
	--state "$TMP/state" "$host:$TMP/rep.img"
[ $status = 0 ] && cmp -s src rep.img && grep -q '^epoch 2$' state &&
	ok "dmsync over ssh applies an incremental stream" ||
	not_ok "incremental over ssh: exit $status, $(cat "$TMP/err")"
scribble src 300 2 >d23
dmextract --dirty d23 --device src --source-id vm1 --base-epoch 2 \
	--new-epoch 3 | $rsh "$host" "$BUILD/bin/dmmerge" --state "$TMP/state" \
	"$TMP/rep.img"
check "the plain pipe dmextract | ssh host dmmerge applies it" \
	cmp -s src rep.img

# a connection cut mid-stream: the sshd session serving it is killed.
# The link runs at 10 Mbit/s meanwhile, so that the 40 MiB take half a
# minute and the cut lands in the middle however loaded the machine is;
# the undo file growing past 1 MiB says the apply is under way.
cp rep.img rep.before
cp state state.before
dd if=/dev/urandom of=src bs=1M count=40 seek=4 conv=notrunc status=none
echo 1024-11263 >d34
listener=$(cat sshd.pid)
tc qdisc change dev "$va" root tbf rate 10mbit burst 64kb latency 100ms
dms --dirty d34 --device src --base-epoch 3 --new-epoch 4 \
	--state "$TMP/state" --undo "$TMP/U" "$host:$TMP/rep.img" \
	2>cut.err &
pid=$!
killed=
for _ in $(seq 1200); do
	if [ "$(stat -c %s U 2>/dev/null || echo 0)" -gt 1048576 ]; then
		for c in $(pgrep -P "$listener"); do
			kill -9 "$c" && killed=$c
		done
		break
	fi
	sleep 0.05
done
wait $pid
rc=$?
tc qdisc change dev "$va" root tbf rate 100mbit burst 64kb latency 100ms
[ -n "$killed" ] || fail "could not cut the connection mid-stream"
[ $rc = 1 ] && grep -q '^epoch 3$' state &&
	ok "a cut connection: dmsync exits 1, the state stays at epoch 3" ||
	not_ok "cut: dmsync exit $rc, state $(grep ^epoch state)," \
		"$(cat cut.err)"
run_status $rsh "$host" "$BUILD/bin/dmmerge" --rollback "$TMP/U" \
	--state "$TMP/state" "$TMP/rep.img"
[ $status = 0 ] && cmp -s rep.img rep.before &&
	ok "after the cut, --rollback over ssh restores epoch 3 exactly" ||
	not_ok "rollback after the cut: exit $status, $(cat "$TMP/err")"
run_status dms --dirty d34 --device src --base-epoch 3 --new-epoch 4 \
	--state "$TMP/state" --undo "$TMP/U" "$host:$TMP/rep.img"
[ $status = 0 ] && cmp -s src rep.img && grep -q '^epoch 4$' state &&
	ok "the next run converges" ||
	not_ok "rerun after the cut: exit $status, $(cat "$TMP/err")"

# -z against plain over the 100 Mbit/s link: wire bytes and time
bytes() { cat "/sys/class/net/$va/statistics/tx_bytes"; }
for z in "" -z; do
	b0=$(bytes)
	t0=$(date +%s.%N)
	dms --all $z --device mixed --new-epoch $((10 + ${#z})) \
		"$host:$TMP/rep$z.img" || not_ok "dmsync --all $z failed"
	t1=$(date +%s.%N)
	b1=$(bytes)
	cmp -s mixed "rep$z.img" || not_ok "dmsync --all $z: replica differs"
	diag "dmsync --all ${z:-(plain)}: 48 MiB (24 random, 24 text)," \
		"$(((b1 - b0) / 1024)) KiB on the wire," \
		"$(echo "$t1 - $t0" | bc) s"
done
ok "-z and plain both sync over 100 Mbit/s (figures above)"

done_testing
