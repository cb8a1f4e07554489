#!/bin/bash
# Boot the patched kernel in QEMU and run the VM tests (or the demo).
#
# Usage: scripts/vm-run.sh [--demo | --bench] [--boot NAME]... [--only REGEX]
#                          [--out DIR] [--jobs N] [--keep-disks]
#        scripts/vm-run.sh --exec FILE [ARG]...
#
# --exec runs your own program or script in the VM, on the same kernel and
# disks as the tests, instead of the test list: FILE (and, with
# LIBTRACK_VM_PROGS, any host programs it needs) is added to the initramfs
# for this run only, its output is shown as it comes, and its exit status is
# the runner's. The VM has the tools (dmsetup, dmtrack, dmextract, ...),
# busybox, four blank disks (/dev/vda, /dev/vdb 2 GiB, /dev/vdc, /dev/vdd
# 256 MiB) and dm-track loaded.
#
# --keep-disks leaves each chain's disk images in DIR/disks-CHAIN for
# inspection (they are deleted otherwise).
#
# A test that prints LIBTRACK-KILL-QEMU on a line of its own has QEMU killed
# with SIGKILL from the host at that moment: no shutdown, no flush, nothing
# the guest kernel could still do. The next boot of its chain finds the
# disks as they were.
#
# The entries of build/selftests/tests.list are grouped by their boot column;
# each boot is one QEMU run. Boots named stock* boot Debian's stock kernel
# with build/initramfs-stock.cpio (scripts/stock-kernel.sh), boots named
# benchunpatched* the test kernel's configuration without the series
# (scripts/kernel.sh --unpatched, which only `make bench` builds), every
# other boot the patched test kernel. Boots named benchcount* and
# benchunpatched* run on one vCPU with the instruction clock (below). Boots whose names differ only in trailing digits
# (crash1, crash2) form a chain: they run one after another on the same four
# virtio disks (sparse files), so a test can crash the VM in one boot and
# check what survived in the next. Chains are independent, each with disks
# of its own, and run side by side, up to --jobs at once (default: the
# number of CPUs; 1 for --demo and --bench, whose output is shown as it
# comes and whose timings must not share the machine).
#
# Writes DIR/vm.tap (every boot's results, KTAP, in list order) and
# DIR/console-BOOT.log. Exit status: 0 when every entry passed or skipped,
# 1 otherwise.
#
# Environment:
#   LIBTRACK_KVM=1       use KVM instead of TCG (never required)
#   LIBTRACK_VM_MEM      guest memory (default 2G)
#   LIBTRACK_VM_CPUS     guest CPUs (default 2)
#   LIBTRACK_VM_JOBS     QEMU instances at once (default: number of CPUs)
#   LIBTRACK_ONLY        like --only
#   LIBTRACK_VM_PROGS    host programs to add to the initramfs (with --exec)
#   LIBTRACK_VM_APPEND   more kernel command line
set -uo pipefail
. "$(dirname "$0")/lib.sh"

demo=0
kind=demo
only=${LIBTRACK_ONLY:-}
out="$top/build/vm"
jobs=${LIBTRACK_VM_JOBS:-$(nproc)}
cpus=${LIBTRACK_VM_CPUS:-2}
boots=()
exec_file=
keep_disks=0
while [ $# -gt 0 ]; do
	case "$1" in
	--exec)
		[ $# -ge 2 ] || die "--exec wants a file to run in the VM"
		exec_file=$2
		shift 2
		exec_args=("$@")
		break
		;;
	--keep-disks) keep_disks=1 ;;
	--demo) demo=1 ;;
	--bench) demo=1; kind=bench ;;
	--boot) boots+=("$2"); shift ;;
	--out) out=$2; shift ;;
	--only) only=$2; shift ;;
	--jobs) jobs=$2; shift ;;
	*) die "usage: vm-run.sh [--demo | --bench] [--boot NAME]... [--only REGEX] [--out DIR] [--jobs N] [--keep-disks] | --exec FILE [ARG]..." ;;
	esac
	shift
done
[ $demo = 1 ] && jobs=1
[ "$jobs" -ge 1 ] 2>/dev/null || die "--jobs wants a number of 1 or more, not '$jobs'"

load_kernel_env
initrd="$top/build/initramfs.cpio"
list="$top/build/selftests/tests.list"
[ -f "$initrd" ] || die "$initrd is missing; run 'make initramfs'"
[ -f "$list" ] || die "$list is missing; run 'make initramfs'"

# --exec: one boot "exec" whose only entry is FILE, from a second cpio
# archive appended to the initramfs (the kernel unpacks both, the second
# over the first).
if [ -n "$exec_file" ]; then
	[ -f "$exec_file" ] || die "--exec: $exec_file does not exist"
	extra=$(mktemp -d)
	mkdir -p "$extra/selftests/exec"
	install -m 755 "$exec_file" "$extra/selftests/exec/"
	printf 'exec\t%s\t-\texec/%s' "${LIBTRACK_EXEC_TIMEOUT:-1800}" \
		"$(basename "$exec_file")" >"$extra/selftests/tests.list"
	for a in "${exec_args[@]}"; do
		case "$a" in *[!A-Za-z0-9_./=:,+-]*)
			die "--exec: quote-free arguments only, not '$a'" ;;
		esac
		printf ' %s' "$a" >>"$extra/selftests/tests.list"
	done
	echo >>"$extra/selftests/tests.list"
	add_host_progs "$extra" ${LIBTRACK_VM_PROGS:-}
	mkdir -p "$top/build"
	cat "$initrd" >"$top/build/initramfs-exec.cpio"
	(cd "$extra" && find . | sort | cpio --quiet -o -H newc -R 0:0) \
		>>"$top/build/initramfs-exec.cpio"
	rm -rf "$extra"
	initrd="$top/build/initramfs-exec.cpio"
	list="$top/build/exec.list"
	printf 'exec\t%s\t-\texec\n' "${LIBTRACK_EXEC_TIMEOUT:-1800}" >"$list"
	boots=(exec)
	demo=1
	jobs=1
fi

if [ ${#boots[@]} -eq 0 ]; then
	while read -r b; do
		case "$b" in
		exec) ;;
		demo* | bench*) [ $demo = 1 ] && [ "${b#"$kind"}" != "$b" ] &&
			boots+=("$b") ;;
		*) [ $demo = 0 ] && boots+=("$b") ;;
		esac
	done < <(grep -v '^[[:space:]]*#' "$list" | grep -E -- "${only:-.}" |
		awk 'NF && !seen[$1]++ { print $1 }')
fi
[ ${#boots[@]} -gt 0 ] || die "no boots to run in $list"

# Debian's stock kernel, for the stock* boots.
stock_initrd="$top/build/initramfs-stock.cpio"
stock_skip=
STOCK_KIMAGE=
if printf '%s\n' "${boots[@]}" | grep -q '^stock'; then
	if [ ! -f "$top/build/stock.env" ]; then
		stock_skip="build/stock.env is missing; run 'make initramfs'"
	else
		# shellcheck disable=SC1091
		. "$top/build/stock.env"
		stock_skip=${STOCK_SKIP:-}
		if [ -z "$stock_skip" ] && { [ ! -f "$STOCK_KIMAGE" ] || [ ! -f "$stock_initrd" ]; }; then
			stock_skip="$STOCK_KIMAGE or $stock_initrd is missing; run 'make initramfs'"
		fi
	fi
fi

# The kernel without the series, for the benchunpatched* boots.
unpatched_skip=
UNPATCHED_KIMAGE=
if printf '%s\n' "${boots[@]}" | grep -q '^benchunpatched'; then
	if [ ! -f "$top/build/kernel-unpatched.env" ]; then
		unpatched_skip="build/kernel-unpatched.env is missing; run scripts/kernel.sh --unpatched"
	else
		UNPATCHED_KIMAGE=$(
			# shellcheck disable=SC1091
			. "$top/build/kernel-unpatched.env" && echo "$KIMAGE"
		)
		[ -f "$UNPATCHED_KIMAGE" ] ||
			unpatched_skip="$UNPATCHED_KIMAGE is missing; run scripts/kernel.sh --unpatched"
	fi
fi

accel="-accel tcg,thread=multi -cpu max"
# The instruction clock: the guest's clock counts the instructions it
# runs (one nanosecond each) instead of following the host's, so timings
# in the VM do not depend on the host's load or scheduling and two boots
# can be compared. One vCPU, one TCG thread. Boots named benchcount* and
# benchunpatched* (which exist to compare two kernels) always use it;
# LIBTRACK_VM_ICOUNT=1 makes every boot use it.
icount_accel="-accel tcg,thread=single -icount shift=0,sleep=off -cpu max"
[ "${LIBTRACK_VM_ICOUNT:-0}" = 1 ] && accel=$icount_accel && cpus=1
if [ "${LIBTRACK_KVM:-0}" = 1 ]; then
	accel="-accel kvm -cpu host"
fi

# Kernel log lines that fail a run wherever they appear.
problems='BUG:|WARNING:|Oops|KASAN|general protection fault|Kernel panic|INFO: task .* blocked|possible circular locking|inconsistent lock state|suspicious RCU usage|INFO: rcu|UBSAN'

# mawk, Debian's awk, fills its whole input buffer before it looks at a
# line; results would show up minutes late.
live_awk=(awk)
if awk -W version 2>/dev/null | grep -q mawk; then
	live_awk=(awk -W interactive)
fi

# The chain a boot belongs to: its name without trailing digits.
chain_of() {
	local c=$1

	while [ "${c%[0-9]}" != "$c" ]; do
		c=${c%[0-9]}
	done
	echo "$c"
}

# One QEMU run of BOOT on the disks in DISKS; its KTAP goes to
# $out/tap-BOOT, and what a person should see to stdout and stderr.
run_boot() {
	local boot=$1 disks=$2 budget console results qrc kimage=$KIMAGE
	local bootrd=$initrd b_accel=$accel b_cpus=$cpus

	budget=$(grep -v '^[[:space:]]*#' "$list" | grep -E -- "${only:-.}" |
		awk -v b="$boot" '$1 == b { t += $2 } END { print t + 120 }')
	console="$out/console-$boot.log"
	results="$out/results-$boot.log"
	case "$boot" in
	stock*)
		if [ -n "$stock_skip" ]; then
			echo "ok 1 boot-$boot # SKIP $stock_skip" >"$out/tap-$boot"
			echo "vm[$boot]: skipped: $stock_skip"
			return
		fi
		kimage=$STOCK_KIMAGE
		bootrd=$stock_initrd
		;;
	benchunpatched*)
		if [ -n "$unpatched_skip" ]; then
			echo "ok 1 boot-$boot # SKIP $unpatched_skip" >"$out/tap-$boot"
			echo "vm[$boot]: skipped: $unpatched_skip"
			return
		fi
		kimage=$UNPATCHED_KIMAGE
		b_accel=$icount_accel b_cpus=1
		;;
	benchcount*)
		b_accel=$icount_accel b_cpus=1
		;;
	esac
	[ $demo = 1 ] || echo "vm: boot '$boot' (up to ${budget}s)"

	# shellcheck disable=SC2086
	rm -f "$out/qemu-$boot.pid"
	timeout -k 10 "$budget" qemu-system-x86_64 \
		$b_accel -machine pc -smp "$b_cpus" \
		-m "${LIBTRACK_VM_MEM:-2G}" \
		-nodefaults -display none -no-reboot \
		-pidfile "$out/qemu-$boot.pid" \
		-kernel "$kimage" -initrd "$bootrd" \
		-append "console=ttyS0 libtrack.boot=$boot libtrack.cpus=$b_cpus ${only:+libtrack.only=$only} panic=-1 log_buf_len=8M loglevel=5 printk.devkmsg=on acpi=noirq ${LIBTRACK_VM_APPEND:-}" \
		-serial "file:$console" -serial stdio \
		-drive "file=$disks/vda.img,if=virtio,format=raw,cache=writeback,discard=unmap" \
		-drive "file=$disks/vdb.img,if=virtio,format=raw,cache=writeback,discard=unmap" \
		-drive "file=$disks/vdc.img,if=virtio,format=raw,cache=writeback,discard=unmap" \
		-drive "file=$disks/vdd.img,if=virtio,format=raw,cache=writeback,discard=unmap" \
		</dev/null 2>"$out/qemu-$boot.err" | sed -u 's/\r$//' |
		tee "$results" |
		"${live_awk[@]}" -v demo=$demo -v boot="$boot" \
			-v pidfile="$out/qemu-$boot.pid" '
			/^    LIBTRACK-KILL-QEMU$/ {
				system("kill -9 $(cat " pidfile ")")
				next
			}
			demo && /^    / { sub(/^    /, ""); if ($0 !~ /^(TAP version|1\.\.|ok |not ok )/) print; fflush(); next }
			demo && /^not ok / { print "FAILED: " $0; fflush(); next }
			demo { next }
			/^# RUN / { buf = ""; secs = ""; next }
			/^# TIME / { secs = " (" $4 " s)"; next }
			/^    / { buf = buf $0 "\n"; next }
			/^(not )?ok / {
				# One write, so that boots running side by side
				# do not interleave a failure with its details.
				line = "vm[" boot "]: " $0 secs "\n"
				if ($1 == "not") line = line buf
				printf "%s", line
				fflush()
			}'
	qrc=${PIPESTATUS[0]}
	if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
		echo "vm: boot '$boot' timed out after ${budget}s" >&2
	elif [ "$qrc" != 0 ]; then
		{
			echo "vm: qemu exited with status $qrc:"
			sed 's/^/vm:   /' "$out/qemu-$boot.err"
		} >&2
	fi

	# Entries that never reported: the VM died, hung or rebooted.
	awk -v boot="$boot" '
		/^1\.\./ { plan = substr($0, 4) + 0 }
		/^# RUN / { running = substr($0, 7); n++ }
		/^# REBOOT-EXPECTED / { rebooting = $3 }
		/^    LIBTRACK-REBOOTING/ { rebooted = 1 }
		/^    LIBTRACK-KILL-QEMU/ { rebooted = 1 }
		/^(not )?ok / { done[n] = 1 }
		/^# BOOT-DONE/ { finished = 1 }
		END {
			if (!plan) {
				print "not ok 1 boot-" boot " # the VM did not start the tests (see console-" boot ".log)"
				exit
			}
			if (finished) exit
			if (n && !done[n]) {
				if (rebooting == n && rebooted)
					print "ok " n " " running " # rebooted as planned"
				else
					print "not ok " n " " running " # the VM stopped during this test (see console-" boot ".log)"
			}
			for (i = n + 1; i <= plan; i++)
				print "not ok " i " boot-" boot "-entry-" i " # not run: the VM stopped before it"
		}' "$results" >"$out/missing-$boot.log"
	if [ -s "$out/missing-$boot.log" ]; then
		[ $demo = 1 ] || sed "s/^/vm[$boot]: /" "$out/missing-$boot.log"
	fi

	# Kernel problems anywhere in the console log (boot and shutdown too).
	grep -E "^\[ *[0-9]+\.[0-9]+\] .*($problems)" "$console" >"$out/kernel-$boot.log"
	{
		cat "$results" "$out/missing-$boot.log"
		if [ -s "$out/kernel-$boot.log" ]; then
			echo "not ok 0 kernel-log-$boot # the kernel reported a problem"
			sed 's/^/    # /' "$out/kernel-$boot.log"
		fi
	} >"$out/tap-$boot"
	if [ -s "$out/kernel-$boot.log" ]; then
		{
			echo "vm[$boot]: the kernel reported a problem:"
			head -n 20 "$out/kernel-$boot.log" | sed 's/^/vm:   /'
		} >&2
	fi
}

# The boots of one chain, in order, on fresh disks of their own.
run_chain() {
	local chain=$1 boot disks="$out/disks-$1"

	mkdir -p "$disks"
	for d in vda:2G vdb:2G vdc:256M vdd:256M; do
		truncate -s "${d#*:}" "$disks/${d%%:*}.img"
	done
	for boot in "${boots[@]}"; do
		[ "$(chain_of "$boot")" = "$chain" ] && run_boot "$boot" "$disks"
	done
	if [ "$keep_disks" = 1 ]; then
		echo "vm: chain '$chain' left its disks in $disks"
	else
		rm -rf "$disks"
	fi
}

rm -rf "$out"
mkdir -p "$out"

chains=()
for boot in "${boots[@]}"; do
	c=$(chain_of "$boot")
	case " ${chains[*]} " in *" $c "*) ;; *) chains+=("$c") ;; esac
done

# Interrupted: stop every QEMU (through its timeout) and every chain.
pids=()
stop_chains() {
	local p

	for p in "${pids[@]}"; do
		pkill -TERM -P "$p"
		kill "$p"
	done 2>/dev/null
}
trap 'stop_chains; exit 1' INT TERM
trap stop_chains EXIT
for c in "${chains[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
		wait -n
	done
	run_chain "$c" &
	pids+=($!)
done
wait
trap - EXIT

# The verdict: every top-level entry ok (or skipped), none missing, no
# kernel problem, from the results of every boot in list order.
: >"$out/vm.tap"
for boot in "${boots[@]}"; do
	if [ -f "$out/tap-$boot" ]; then
		cat "$out/tap-$boot" >>"$out/vm.tap"
	else
		echo "not ok 1 boot-$boot # the runner did not run this boot" \
			>>"$out/vm.tap"
	fi
done
grep -q '^not ok ' "$out/vm.tap" && exit 1
exit 0
