/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the libtrack selftests that run in the test VM: the disks the
 * runner attaches, running a command, and filling and comparing buffers.
 * Included after kselftest_harness.h.
 */
#ifndef LIBTRACK_VMTEST_H
#define LIBTRACK_VMTEST_H

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/fs.h>

/* The runner's disks: vda and vdb are 2 GiB, vdc and vdd 256 MiB. */
#define VM_DISK_A "/dev/vda"
#define VM_DISK_B "/dev/vdb"
#define VM_DISK_C "/dev/vdc"
#define VM_DISK_D "/dev/vdd"

/* Run a shell command; returns its exit status, or -1 if it died. */
static inline int vm_run(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* Size of a block device in bytes, or -errno. */
static inline long long vm_dev_size(const char *path)
{
	unsigned long long size;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -1;
	if (ioctl(fd, BLKGETSIZE64, &size) < 0)
		size = 0;
	close(fd);
	return (long long)size;
}

/* A buffer whose content depends on (seed, offset), so misplaced data shows. */
static inline void vm_fill(void *buf, size_t len, unsigned int seed,
			   unsigned long long off)
{
	unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)((off + i) * 131 + seed * 7 + ((off + i) >> 9));
}

/* "major:minor" of a block device, as dm prints it in a table. */
static inline const char *vm_devno(const char *path)
{
	static char buf[4][32];
	static unsigned int n;
	char *out = buf[n++ % 4];
	struct stat st;

	if (stat(path, &st))
		snprintf(out, 32, "?");
	else
		snprintf(out, 32, "%u:%u", major(st.st_rdev),
			 minor(st.st_rdev));
	return out;
}

/* Does the target type exist in this kernel (dmsetup targets)? */
static inline int vm_dm_target_present(const char *name)
{
	return vm_run("dmsetup targets 2>/dev/null | grep -q '^%s '", name) == 0;
}

/* Write a marker line into the kernel log. */
static inline void vm_kmsg_mark(const char *tag)
{
	vm_run("echo 'vmtest: mark %s' >/dev/kmsg", tag);
}

/* Does the kernel log after marker TAG contain NEEDLE? */
static inline int vm_kmsg_has(const char *tag, const char *needle)
{
	return vm_run("dmesg | awk 'on; index($0, \"vmtest: mark %s\") { on = 1 }' | "
		      "grep -qF -- \"%s\"", tag, needle) == 0;
}

#endif /* LIBTRACK_VMTEST_H */
