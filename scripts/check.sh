#!/bin/bash
# Run every test: build the test kernel and initramfs, run the host tests
# (cmocka unit tests in build/tests, shell tests in tests/*.sh) and the VM
# tests, and print one closing line for all of them.
#
# The VM tests start first and run in the background while the host tests
# run (most of either is waiting: on QEMU, on timers); the host results
# are printed as they come, the VM results after them.
#
# Usage: scripts/check.sh [--host-only | --vm-only]
#
# A host test prints TAP on stdout; exit status 0 is a pass, 77 a skip,
# anything else a failure. Each runs under a timeout (TEST_TIMEOUT, default
# 600 s, or a "# timeout: N" line in a shell test).
set -uo pipefail
. "$(dirname "$0")/lib.sh"

host=1
vm=1
case "${1:-}" in
--host-only) vm=0 ;;
--vm-only) host=0 ;;
"") ;;
*) die "usage: check.sh [--host-only | --vm-only]" ;;
esac

out="$top/build/check"
rm -rf "$out"
mkdir -p "$out"
status=0
taps=()

if [ $vm = 1 ]; then
	if ! make -s -C "$top" initramfs; then
		echo "check: building the test kernel or initramfs failed" >&2
		echo "not ok 1 build-kernel-and-initramfs" >"$out/build.tap"
		taps+=("$out/build.tap")
		vm=0
		status=1
	fi
fi

run_host_test() {
	local n=$1 t=$2 name timeout rc
	name=${t#"$top"/}
	timeout=${TEST_TIMEOUT:-600}
	if [ "${t%.sh}" != "$t" ]; then
		timeout=$(sed -n 's/^# timeout: \([0-9]*\)$/\1/p' "$t" | head -n 1)
		timeout=${timeout:-${TEST_TIMEOUT:-600}}
	fi
	echo "# RUN $name" >>"$out/host.log"
	(cd "$top" && CMOCKA_MESSAGE_OUTPUT=TAP timeout -k 5 "$timeout" "$t" \
		</dev/null >"$out/current.log" 2>&1)
	rc=$?
	sed 's/^/    /' "$out/current.log" >>"$out/host.tap"
	cat "$out/current.log" >>"$out/host.log"
	case $rc in
	0) line="ok $n $name" ;;
	77) line="ok $n $name # SKIP $(grep -m1 -i 'skip' "$out/current.log" | cut -c1-100)" ;;
	124 | 137) line="not ok $n $name # TIMEOUT after ${timeout}s" ;;
	*) line="not ok $n $name # exit status $rc" ;;
	esac
	echo "$line" >>"$out/host.tap"
	echo "host: $line"
	if [ "${line#not}" != "$line" ]; then
		sed 's/^/    /' "$out/current.log" | tail -n 40
		return 1
	fi
	return 0
}

if [ $vm = 1 ]; then
	"$top/scripts/vm-run.sh" --out "$out/vm" >"$out/vm.out" 2>&1 &
	vm_pid=$!
	trap 'kill $vm_pid 2>/dev/null' EXIT
fi

if [ $host = 1 ]; then
	tests=()
	for t in "$top"/build/tests/test_* "$top"/tests/*.sh; do
		[ -x "$t" ] && tests+=("$t")
	done
	echo "1..${#tests[@]}" >"$out/host.tap"
	n=0
	for t in "${tests[@]}"; do
		n=$((n + 1))
		run_host_test $n "$t" || status=1
	done
	taps+=("$out/host.tap")
fi

if [ $vm = 1 ]; then
	# What the VM tests printed so far, then the rest as it comes.
	tail -n +1 -f --pid=$vm_pid "$out/vm.out"
	wait $vm_pid || status=1
	trap - EXIT
	taps+=("$out/vm/vm.tap")
fi

summary=$("$top/scripts/tap-summary.sh" "${taps[@]}") || status=1
echo "$summary"
exit $status
