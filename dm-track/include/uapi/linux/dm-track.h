/* SPDX-License-Identifier: GPL-2.0-only WITH Linux-syscall-note */
/*
 * dm-track: generic netlink interface for reading the dirty sets of a
 * device-mapper "track" target.
 *
 * A DM_TRACK_CMD_GET_EXTENTS dump request names one device by its dm name
 * (DM_TRACK_ATTR_DEV_NAME) or dm uuid (DM_TRACK_ATTR_DEV_UUID) and a set
 * (DM_TRACK_ATTR_SET). Every reply message carries the epoch of that set and
 * an array of struct dm_track_extent in DM_TRACK_ATTR_EXTENTS, in block
 * order; the last message may carry no extents. The dump ends with -ENODEV
 * if the device goes away or its table is reloaded, and with -ESTALE if a
 * message changes the sets while it is being read (freeze, commit, abort,
 * clear, mark_all): start again.
 *
 * The frozen set does not change otherwise, so its dump is exact and a run
 * is never split between messages. The active set is being written to: its
 * dump is a live view, each message a snapshot of the blocks ahead of the
 * cursor. A block written behind the cursor is not reported, and a run may
 * continue in the next message (the next run starts where the last one
 * ended): merge adjacent runs. Freeze first for a set that holds still.
 * Requires CAP_SYS_ADMIN (and CAP_NET_ADMIN, as for any admin genl op).
 */
#ifndef _UAPI_LINUX_DM_TRACK_H
#define _UAPI_LINUX_DM_TRACK_H

#include <linux/types.h>

#define DM_TRACK_GENL_NAME	"dm-track"
#define DM_TRACK_GENL_VERSION	1

enum dm_track_cmd {
	DM_TRACK_CMD_UNSPEC,
	DM_TRACK_CMD_GET_EXTENTS,	/* dump: runs of dirty blocks */
	__DM_TRACK_CMD_MAX,
};

#define DM_TRACK_CMD_MAX (__DM_TRACK_CMD_MAX - 1)

enum dm_track_attr {
	DM_TRACK_ATTR_UNSPEC,
	DM_TRACK_ATTR_DEV_NAME,		/* string: dm device name */
	DM_TRACK_ATTR_DEV_UUID,		/* string: dm device uuid */
	DM_TRACK_ATTR_SET,		/* u8: enum dm_track_set */
	DM_TRACK_ATTR_START,		/* u64: first block to report (request) */
	DM_TRACK_ATTR_EPOCH,		/* u64: epoch of the set (reply) */
	DM_TRACK_ATTR_EXTENTS,		/* binary: struct dm_track_extent[] */
	DM_TRACK_ATTR_PAD,
	__DM_TRACK_ATTR_MAX,
};

#define DM_TRACK_ATTR_MAX (__DM_TRACK_ATTR_MAX - 1)

/* The dirty sets of a track device. */
enum dm_track_set {
	DM_TRACK_SET_ACTIVE = 0,	/* written in the current epoch */
	DM_TRACK_SET_FROZEN = 1,	/* frozen by the last "freeze" message */
};

/* A run of dirty blocks: blocks first .. first + count - 1. */
struct dm_track_extent {
	__u64 first;
	__u64 count;
};

#endif /* _UAPI_LINUX_DM_TRACK_H */
