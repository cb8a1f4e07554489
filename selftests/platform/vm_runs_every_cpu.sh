#!/bin/sh
# Every CPU QEMU was given is online in the VM. Without it the race tests
# (the hammer, concurrent creates, freeze against writers) run on one CPU
# and prove much less than they seem to: the runner passes the count it gave
# QEMU as libtrack.cpus= on the kernel command line.
given=$(sed -n 's/.*libtrack\.cpus=\([0-9]*\).*/\1/p' /proc/cmdline)
if [ -z "$given" ]; then
	echo "# SKIP: the runner did not say how many CPUs it gave (libtrack.cpus=)"
	exit 4
fi
online=$(grep -c '^processor' /proc/cpuinfo)
echo "# CPUs given: $given, online: $online ($(cat /sys/devices/system/cpu/online))"
if [ "$online" -ne "$given" ]; then
	echo "# only $online of $given CPUs came up: check CONFIG_ACPI and CONFIG_SMP in selftests/config"
	exit 1
fi
exit 0
