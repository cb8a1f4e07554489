/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dm-track: building out of tree against kernels older than the one the
 * source is written for (the newest long-term kernel, 6.12).
 *
 * The source uses the current kernel API. Where an older kernel spells a
 * call differently, this header gives it the current spelling, so that the
 * call sites read as they do in tree. Where an older kernel lacks a feature
 * outright, the call site names a compat_*() wrapper that is empty there;
 * scripts/gen-dm-track-patch.sh writes each wrapper back as the plain
 * statement and drops the #include of this header, so the in-tree patch
 * carries none of it. dm-track.rst ("Older kernels") says what dm-track
 * does where a feature is missing and why that is still correct.
 *
 * Every difference is a version check on LINUX_VERSION_CODE, and lives
 * here. Stable backports are named with the release that carried them.
 */
#ifndef DM_TRACK_COMPAT_H
#define DM_TRACK_COMPAT_H

#include <linux/version.h>
#include <linux/device-mapper.h>
#include <linux/dm-io.h>
#include <net/genetlink.h>

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 0)
#error "dm-track needs Linux 6.1 or newer"
#endif

/*
 * 6.5 made the open mode of a block device a blk_mode_t with BLK_OPEN_*
 * bits; before, dm_get_device() took an fmode_t with the same meaning.
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 5, 0)
#define BLK_OPEN_READ	FMODE_READ
#define BLK_OPEN_WRITE	FMODE_WRITE
#endif

/*
 * 6.6 added genl_info_dump(): the request's attributes, as a genl_info,
 * in a dump's start and dumpit callbacks. Before, they were in the
 * genl_dumpit_info that the genetlink core puts in cb->data before it
 * calls start. The genl_info built here lives as long as the block of the
 * caller; dm-track only reads its attrs and extack there.
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 6, 0)
#define genl_info_dump(cb)						\
	(&(const struct genl_info) {					\
		.attrs = genl_dumpit_info(cb)->attrs,			\
		.extack = (cb)->extack,					\
	})
#endif

/*
 * dm_io() takes an I/O priority since 6.9. Stable carried that to 6.1.83
 * (Debian's 6.1 changelog) and, in the same releases, to 6.6.23, 6.7.11 and
 * 6.8.2; 6.2 to 6.5 had reached their end before. Only 6.1 kernels after
 * 6.1.83 are built here (tests/dm_track_builds_on_distro_kernels.sh).
 * Without it, dm_io() submits at the default priority, which is what
 * dm-track asks for (IOPRIO_DEFAULT) anyway.
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 83) ||			\
	(LINUX_VERSION_CODE >= KERNEL_VERSION(6, 2, 0) &&		\
	 LINUX_VERSION_CODE < KERNEL_VERSION(6, 6, 23)) ||		\
	(LINUX_VERSION_CODE >= KERNEL_VERSION(6, 7, 0) &&		\
	 LINUX_VERSION_CODE < KERNEL_VERSION(6, 7, 11)) ||		\
	(LINUX_VERSION_CODE >= KERNEL_VERSION(6, 8, 0) &&		\
	 LINUX_VERSION_CODE < KERNEL_VERSION(6, 8, 2))
#define dm_io(io_req, num_regions, where, sync_error_bits, ioprio)	\
	dm_io(io_req, num_regions, where, ((void)(ioprio), sync_error_bits))
#endif

/*
 * dm_devt_from_path() resolves a table argument (a path or major:minor) to
 * a dev_t without opening the device. 6.1 does not export it; it is in
 * 6.9 and later (the boundary is kept conservative: the version here does
 * the same lookup, apart from early boot, where no view is made).
 */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 9, 0)
#include <linux/blkdev.h>
#include <linux/kdev_t.h>

static inline int compat_dm_devt_from_path(const char *path, dev_t *dev_p)
{
	unsigned int major, minor;
	char dummy;
	dev_t dev;

	if (sscanf(path, "%u:%u%c", &major, &minor, &dummy) == 2) {
		dev = MKDEV(major, minor);
		if (MAJOR(dev) != major || MINOR(dev) != minor)
			return -EOVERFLOW;
		*dev_p = dev;
		return 0;
	}
	return lookup_bdev(path, dev_p);
}

#define dm_devt_from_path compat_dm_devt_from_path
#endif

/*
 * In tree: ti->flush_bypasses_map = true;
 *
 * 6.10 lets a target say that dm core may send empty flushes straight to
 * its devices without calling its map function. Before, dm core calls
 * track_map() with each empty flush (num_flush_bios = 1), which passes it
 * to the data device, as the linear target did before 6.10.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
#define compat_set_flush_bypasses_map(ti) ((ti)->flush_bypasses_map = true)
#else
#define compat_set_flush_bypasses_map(ti) ((void)(ti))
#endif

#endif /* DM_TRACK_COMPAT_H */
