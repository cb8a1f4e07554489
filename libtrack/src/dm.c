// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * track_dm_*: drive a dm-track device. Table changes and messages go through
 * libdevmapper; the dirty extents come over the "dm-track" generic netlink
 * family (libmnl).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <libdevmapper.h>
#include <libmnl/libmnl.h>
#include <linux/dm-ioctl.h>
#include <linux/dm-track.h>
#include <linux/fs.h>
#include <linux/genetlink.h>

#include "internal.h"

struct track_dm {
	char name[DM_NAME_LEN];
	char uuid[DM_UUID_LEN];
	char path[sizeof("/dev/mapper/") + DM_NAME_LEN];
};

/* libdevmapper reports errors itself; a library must stay quiet. */
static void dm_quiet(int level, const char *file, int line, int dm_errno,
		     const char *fmt, ...)
{
}

static void dm_quiet_init(void)
{
	dm_log_with_errno_init(dm_quiet);
}

/* Once per process, whichever thread comes first. */
static void dm_setup(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, dm_quiet_init);
}

/* -errno for a failed task: the ioctl's errno, or EIO if it has none. */
static int task_error(struct dm_task *dmt)
{
	int e = dm_task_get_errno(dmt);

	return e > 0 ? -e : -EIO;
}

/*
 * dm_task_create() fails when it cannot talk to the kernel as well as when
 * memory is short; tell the two apart for the caller.
 */
static int task_create_error(void)
{
	int fd = open("/dev/mapper/control", O_RDWR | O_CLOEXEC);

	if (fd < 0)	/* ENOENT, ENODEV: no device-mapper; EACCES: not root */
		return errno == ENOENT || errno == ENXIO ? -ENODEV : -errno;
	close(fd);
	return -ENOMEM;
}

static struct dm_task *task_for(int type, const struct track_dm *dm)
{
	struct dm_task *dmt = dm_task_create(type);

	if (!dmt)
		return NULL;
	if (!dm_task_set_name(dmt, dm->name)) {
		dm_task_destroy(dmt);
		return NULL;
	}
	return dmt;
}

/*
 * Create NAME with one target of SECTORS sectors and wait for udev.
 * libdevmapper loses the errno of a failed create: check first.
 */
static int create_device(const char *name, const char *uuid, bool read_only,
			 uint64_t sectors, const char *target,
			 const char *params)
{
	struct dm_info info;
	struct dm_task *dmt;
	uint32_t cookie = 0;
	int r = 0;

	dmt = dm_task_create(DM_DEVICE_INFO);
	if (!dmt)
		return task_create_error();
	if (dm_task_set_name(dmt, name) && dm_task_run(dmt) &&
	    dm_task_get_info(dmt, &info) && info.exists) {
		dm_task_destroy(dmt);
		return -EEXIST;
	}
	dm_task_destroy(dmt);

	dmt = dm_task_create(DM_DEVICE_CREATE);
	if (!dmt)
		return task_create_error();
	if (!dm_task_set_name(dmt, name) ||
	    (uuid && !dm_task_set_uuid(dmt, uuid)) ||
	    (read_only && !dm_task_set_ro(dmt)) ||
	    !dm_task_add_target(dmt, 0, sectors, target, params) ||
	    !dm_task_set_cookie(dmt, &cookie, 0)) {
		r = -ENOMEM;
		goto out;
	}
	if (!dm_task_run(dmt))
		r = task_error(dmt);
	dm_udev_wait(cookie);
out:
	dm_task_destroy(dmt);
	return r;
}

TRACK_EXPORT int track_dm_create(const char *name,
				 const struct track_dm_params *p)
{
	uint64_t length;
	uint32_t bs;
	char params[4096];
	int n;

	dm_setup();
	if (!name || !*name || strlen(name) >= DM_NAME_LEN || !p ||
	    !p->data_dev || !trk_all_zero(p->reserved, sizeof(p->reserved)) ||
	    (p->cow_dev && !*p->cow_dev))
		return -EINVAL;
	length = p->length;
	bs = p->block_size ? p->block_size : 4096;
	if (bs < 512 || (bs & (bs - 1)))
		return -EINVAL;

	if (!length) {
		uint64_t bytes;
		int r;
		struct stat st;
		int fd = open(p->data_dev, O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			return -errno;
		if (fstat(fd, &st) == 0 && S_ISBLK(st.st_mode))
			r = ioctl(fd, BLKGETSIZE64, &bytes) ? -errno : 0;
		else
			r = -ENOTBLK;
		close(fd);
		if (r)
			return r;
		if (bytes / 512 <= p->offset)
			return -ENOSPC;
		length = bytes / 512 - p->offset;
	}

	n = snprintf(params, sizeof(params), "%s %" PRIu64 " %u", p->data_dev,
		     p->offset, bs / 512);
	if (p->region_size && (!p->metadata_dev || p->region_size < bs ||
			       (p->region_size & (p->region_size - 1)) ||
			       p->region_size / 512 > UINT32_MAX))
		return -EINVAL;
	if (p->clean || p->metadata_dev || p->cow_dev)
		n += snprintf(params + n, sizeof(params) - n, " %d%s%s%s%s%s",
			      (p->clean ? 1 : 0) + (p->metadata_dev ? 2 : 0) +
			      (p->region_size ? 2 : 0) + (p->cow_dev ? 2 : 0),
			      p->clean ? " clean" : "",
			      p->metadata_dev ? " metadata " : "",
			      p->metadata_dev ? p->metadata_dev : "",
			      p->cow_dev ? " cow_dev " : "",
			      p->cow_dev ? p->cow_dev : "");
	if (p->region_size && n < (int)sizeof(params))
		n += snprintf(params + n, sizeof(params) - n,
			      " region_size %" PRIu64, p->region_size / 512);
	if (n >= (int)sizeof(params))
		return -ENAMETOOLONG;

	return create_device(name, p->uuid, false, length, "track", params);
}

TRACK_EXPORT int track_dm_remove(const char *name)
{
	struct dm_task *dmt;
	uint32_t cookie = 0;
	int r = 0;

	dm_setup();
	dmt = dm_task_create(DM_DEVICE_REMOVE);
	if (!dmt)
		return task_create_error();
	if (!dm_task_set_name(dmt, name) ||
	    !dm_task_set_cookie(dmt, &cookie, 0)) {
		dm_task_destroy(dmt);
		return -ENOMEM;
	}
	if (!dm_task_run(dmt))
		r = task_error(dmt);
	dm_udev_wait(cookie);
	dm_task_destroy(dmt);
	return r;
}

TRACK_EXPORT int track_dm_open(const char *name, struct track_dm **dmp)
{
	char *type = NULL, *params = NULL;
	uint64_t start, length;
	struct track_dm *dm;
	struct dm_task *dmt;
	struct dm_info info;
	const char *s;
	int r = 0;

	dm_setup();
	*dmp = NULL;
	if (!name || !*name)
		return -EINVAL;

	dmt = dm_task_create(DM_DEVICE_TABLE);
	if (!dmt)
		return task_create_error();
	/* A dm uuid usually has a prefix ("LVM-", "CRYPT-"); try names first. */
	if (!dm_task_set_name(dmt, name)) {
		r = -ENOMEM;
		goto out;
	}
	if (!dm_task_run(dmt) || !dm_task_get_info(dmt, &info) ||
	    !info.exists) {
		dm_task_destroy(dmt);
		dmt = dm_task_create(DM_DEVICE_TABLE);
		if (!dmt)
			return task_create_error();
		if (!dm_task_set_uuid(dmt, name)) {
			r = -ENOMEM;
			goto out;
		}
		if (!dm_task_run(dmt) || !dm_task_get_info(dmt, &info) ||
		    !info.exists) {
			r = -ENODEV;
			goto out;
		}
	}

	dm_get_next_target(dmt, NULL, &start, &length, &type, &params);
	if (!type || strcmp(type, "track")) {
		r = -EMEDIUMTYPE;
		goto out;
	}

	dm = calloc(1, sizeof(*dm));
	if (!dm) {
		r = -ENOMEM;
		goto out;
	}
	s = dm_task_get_name(dmt);
	snprintf(dm->name, sizeof(dm->name), "%s", s ? s : name);
	s = dm_task_get_uuid(dmt);
	snprintf(dm->uuid, sizeof(dm->uuid), "%s", s ? s : "");
	snprintf(dm->path, sizeof(dm->path), "/dev/mapper/%s", dm->name);
	*dmp = dm;
out:
	dm_task_destroy(dmt);
	return r;
}

TRACK_EXPORT void track_dm_free(struct track_dm *dm)
{
	free(dm);
}

TRACK_EXPORT const char *track_dm_name(const struct track_dm *dm)
{
	return dm->name;
}

TRACK_EXPORT const char *track_dm_uuid(const struct track_dm *dm)
{
	return dm->uuid;
}

TRACK_EXPORT const char *track_dm_path(const struct track_dm *dm)
{
	return dm->path;
}

/* "N" or "-" (0) */
static int parse_u64_or_dash(const char *s, uint64_t *v)
{
	char *end;

	if (!strcmp(s, "-")) {
		*v = 0;
		return 0;
	}
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || *end || end == s ? -EPROTO : 0;
}

#define STATUS_FIELDS	15
#define STATUS_FIELD_LEN	64

/*
 * Split LINE at white space into F (at most STATUS_FIELDS fields, each
 * shorter than STATUS_FIELD_LEN); the number of fields, or -EPROTO.
 */
static int split_status(const char *line,
			char f[STATUS_FIELDS][STATUS_FIELD_LEN])
{
	static const char space[] = " \t\n\v\f\r";
	int n = 0;

	for (;;) {
		size_t len;

		line += strspn(line, space);
		len = strcspn(line, space);
		if (!len)
			return n;
		if (n == STATUS_FIELDS || len >= STATUS_FIELD_LEN)
			return -EPROTO;
		memcpy(f[n], line, len);
		f[n][len] = '\0';
		n++;
		line += len;
	}
}

/*
 * The snapshot fields after the first ten (F, N of them), absent before
 * snapshot mode; the last two (the COW device) are absent before
 * dm-track 1.1.
 */
static int parse_snapshot(char f[][STATUS_FIELD_LEN], int n,
			  struct track_dm_status *st)
{
	uint64_t v[4] = { 0 };
	int i;

	if (n == 0)
		return 0;
	if (n != 3 && n != 5)
		return -EPROTO;
	for (i = 0; i < n - 1; i++)
		if (parse_u64_or_dash(f[i + 1], &v[i]))
			return -EPROTO;
	st->snap_cow_bytes = v[2];
	st->snap_cow_size = v[3];
	if (!strcmp(f[0], "active"))
		st->snapshot = TRACK_DM_SNAP_ACTIVE;
	else if (!strcmp(f[0], "failed"))
		st->snapshot = TRACK_DM_SNAP_FAILED;
	else if (strcmp(f[0], "-"))
		return -EPROTO;
	st->snap_bytes = v[0];
	st->snap_limit = v[1];
	return 0;
}

/*
 * Parse a status line of the track target (see dm-track.rst). A line no
 * dm-track prints (a field missing, extra or too long, a block size that
 * is not a power of two up to 65536 sectors, more dirty blocks than
 * blocks) is -EPROTO.
 */
int trk_dm_parse_status(const char *line, struct track_dm_status *st)
{
	char f[STATUS_FIELDS][STATUS_FIELD_LEN];
	uint64_t v[8];
	int i, n;

	memset(st, 0, sizeof(*st));
	n = split_status(line, f);
	if (n < 10)
		return -EPROTO;
	for (i = 0; i < 8; i++)
		if (parse_u64_or_dash(f[i], &v[i]))
			return -EPROTO;
	if (!v[0] || v[0] > 65536 || (v[0] & (v[0] - 1)) ||
	    v[2] > v[1] || v[3] > v[1])
		return -EPROTO;
	st->block_size = v[0] * 512;
	st->nr_blocks = v[1];
	st->dirty_active = v[2];
	st->dirty_frozen = v[3];
	st->epoch = v[4];
	st->frozen_epoch = v[5];
	st->committed_epoch = v[6];
	st->mem_bytes = v[7];
	if (!strcmp(f[8], "-"))
		st->persist = TRACK_DM_PERSIST_NONE;
	else if (!strcmp(f[8], "ok"))
		st->persist = TRACK_DM_PERSIST_OK;
	else
		st->persist = TRACK_DM_PERSIST_FAILED;
	if (strlen(f[9]) >= sizeof(st->track_id))
		return -EPROTO;
	memcpy(st->track_id, f[9], strlen(f[9]) + 1);
	return parse_snapshot(f + 10, n - 10, st);
}

TRACK_EXPORT int track_dm_get_status(struct track_dm *dm,
				 struct track_dm_status *st)
{
	char *type = NULL, *params = NULL;
	uint64_t start, length;
	struct dm_task *dmt;
	int r;

	dmt = task_for(DM_DEVICE_STATUS, dm);
	if (!dmt)
		return task_create_error();
	if (!dm_task_run(dmt)) {
		r = task_error(dmt);
		goto out;
	}
	dm_get_next_target(dmt, NULL, &start, &length, &type, &params);
	if (!type || strcmp(type, "track")) {
		r = -EMEDIUMTYPE;
		goto out;
	}
	r = trk_dm_parse_status(params ? params : "", st);
out:
	dm_task_destroy(dmt);
	return r;
}

/* Send MSG to the target; the response, if any, goes to RESP. */
static int dm_message(struct track_dm *dm, const char *msg, char *resp,
		      size_t len)
{
	struct dm_task *dmt;
	const char *out;
	int r = 0;

	dmt = task_for(DM_DEVICE_TARGET_MSG, dm);
	if (!dmt)
		return task_create_error();
	if (!dm_task_set_sector(dmt, 0) || !dm_task_set_message(dmt, msg)) {
		r = -ENOMEM;
		goto out;
	}
	if (!dm_task_run(dmt)) {
		r = task_error(dmt);
		goto out;
	}
	if (resp) {
		out = dm_task_get_message_response(dmt);
		snprintf(resp, len, "%s", out ? out : "");
	}
out:
	dm_task_destroy(dmt);
	return r;
}

TRACK_EXPORT int track_dm_freeze(struct track_dm *dm, uint64_t *epoch)
{
	char resp[64];
	int r;

	r = dm_message(dm, "freeze", resp, sizeof(resp));
	if (r)
		return r;
	return parse_u64_or_dash(resp, epoch);
}

/*
 * The version of the kernel's target type NAME (loading no module): its
 * major * 1000 + minor, or 0 if there is none.
 */
static int target_version(const char *name)
{
	struct dm_versions *target, *last;
	struct dm_task *dmt;
	int found = 0;

	dmt = dm_task_create(DM_DEVICE_LIST_VERSIONS);
	if (!dmt)
		return 0;
	if (dm_task_run(dmt)) {
		target = dm_task_get_versions(dmt);
		do {
			last = target;
			if (!strcmp(name, target->name)) {
				found = (int)target->version[0] * 1000 +
					(int)target->version[1];
				if (!found)
					found = 1;
				break;
			}
			target = (struct dm_versions *)((char *)target +
							target->next);
		} while (last != target);
	}
	dm_task_destroy(dmt);
	return found;
}

/* Does the kernel have target type NAME (loading no module)? */
static int has_target(const char *name)
{
	return target_version(name) != 0;
}

TRACK_EXPORT int track_dm_freeze_snapshot(struct track_dm *dm,
					  uint64_t limit, uint64_t *epoch)
{
	char msg[64], resp[64];
	int r;

	if (limit)
		snprintf(msg, sizeof(msg), "freeze snapshot %" PRIu64, limit);
	else
		snprintf(msg, sizeof(msg), "freeze snapshot");
	r = dm_message(dm, msg, resp, sizeof(resp));
	/* A target without snapshot mode refuses the argument. */
	if (r == -EINVAL && !has_target("track-view"))
		return -EOPNOTSUPP;
	if (r)
		return r;
	return parse_u64_or_dash(resp, epoch);
}

TRACK_EXPORT int track_dm_view_create(struct track_dm *dm, const char *name)
{
	char params[sizeof(dm->path) + 1];
	uint64_t bytes;
	int fd, r;

	if (!name || !*name || strlen(name) >= DM_NAME_LEN)
		return -EINVAL;
	if (!has_target("track-view"))
		return -EOPNOTSUPP;
	fd = open(dm->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = ioctl(fd, BLKGETSIZE64, &bytes) ? -errno : 0;
	close(fd);
	if (r)
		return r;
	snprintf(params, sizeof(params), "%s", dm->path);
	r = create_device(name, NULL, true, bytes / 512, "track-view",
			  params);
	/*
	 * track-view 1.0 opened the track device, which a file system
	 * mounted on it holds exclusively; 1.1 does not open it.
	 */
	if (r && r != -EEXIST && target_version("track-view") < 1001)
		return -EBUSY;
	return r;
}

/* The device number of DM's block device, from its node. */
static int dm_devt(const struct track_dm *dm, uint32_t *major,
		   uint32_t *minor)
{
	struct stat st;

	if (stat(dm->path, &st))
		return errno == ENOENT ? -ENODEV : -errno;
	if (!S_ISBLK(st.st_mode))
		return -ENODEV;
	*major = major(st.st_rdev);
	*minor = minor(st.st_rdev);
	return 0;
}

/*
 * Is NAME a track-view device over the device MAJOR:MINOR? 0 if so;
 * -ENODEV if NAME does not exist, -EMEDIUMTYPE if its live table is not
 * one track-view target, -EXDEV if that is a view of another device.
 * *OPEN gets its open count.
 */
static int view_of(const char *name, uint32_t major, uint32_t minor,
		   int32_t *open)
{
	char *type = NULL, *params = NULL;
	uint64_t start, length;
	unsigned int ma, mi;
	struct dm_task *dmt;
	struct dm_info info;
	void *next;
	char end;
	int r = 0;

	dmt = dm_task_create(DM_DEVICE_TABLE);
	if (!dmt)
		return task_create_error();
	if (!dm_task_set_name(dmt, name)) {
		r = -ENOMEM;
		goto out;
	}
	if (!dm_task_run(dmt)) {
		r = task_error(dmt);
		if (r == -ENXIO)
			r = -ENODEV;
		goto out;
	}
	if (!dm_task_get_info(dmt, &info) || !info.exists) {
		r = -ENODEV;
		goto out;
	}
	*open = info.open_count;
	next = dm_get_next_target(dmt, NULL, &start, &length, &type, &params);
	if (next || !type || strcmp(type, "track-view")) {
		r = -EMEDIUMTYPE;
		goto out;
	}
	/* The target prints the track device as major:minor. */
	if (!params || sscanf(params, "%u:%u%c", &ma, &mi, &end) != 2) {
		r = -EPROTO;
		goto out;
	}
	if (ma != major || mi != minor)
		r = -EXDEV;
out:
	dm_task_destroy(dmt);
	return r;
}

TRACK_EXPORT int track_dm_for_each_view(struct track_dm *dm,
					track_dm_view_fn fn, void *arg)
{
	uint32_t major, minor;
	struct dm_names *names;
	struct dm_task *dmt;
	unsigned int next;
	int32_t open;
	int r;

	if (!fn)
		return -EINVAL;
	r = dm_devt(dm, &major, &minor);
	if (r)
		return r;
	dmt = dm_task_create(DM_DEVICE_LIST);
	if (!dmt)
		return task_create_error();
	if (!dm_task_run(dmt)) {
		r = task_error(dmt);
		goto out;
	}
	names = dm_task_get_names(dmt);
	if (!names || !names->dev)
		goto out;	/* no device-mapper devices at all */
	/* The list is a copy: FN may remove the view it is given. */
	do {
		next = names->next;
		/* A device removed meanwhile is not a view any more. */
		if (!view_of(names->name, major, minor, &open)) {
			r = fn(names->name, arg);
			if (r)
				break;
		}
		names = (struct dm_names *)((char *)names + next);
	} while (next);
out:
	dm_task_destroy(dmt);
	return r;
}

TRACK_EXPORT int track_dm_view_remove(struct track_dm *dm, const char *name)
{
	uint32_t major, minor;
	int32_t open = 0;
	int r;

	if (!name || !*name || strlen(name) >= DM_NAME_LEN)
		return -EINVAL;
	r = dm_devt(dm, &major, &minor);
	if (r)
		return r;
	r = view_of(name, major, minor, &open);
	if (r)
		return r;
	if (open > 0)
		return -EBUSY;
	return track_dm_remove(name);
}

static int epoch_message(struct track_dm *dm, const char *verb,
			 uint64_t epoch)
{
	char msg[64];

	snprintf(msg, sizeof(msg), "%s %" PRIu64, verb, epoch);
	return dm_message(dm, msg, NULL, 0);
}

TRACK_EXPORT int track_dm_commit(struct track_dm *dm, uint64_t epoch)
{
	return epoch_message(dm, "commit", epoch);
}

TRACK_EXPORT int track_dm_abort(struct track_dm *dm, uint64_t epoch)
{
	return epoch_message(dm, "abort", epoch);
}

TRACK_EXPORT int track_dm_clear(struct track_dm *dm)
{
	return dm_message(dm, "clear", NULL, 0);
}

TRACK_EXPORT int track_dm_mark_all(struct track_dm *dm)
{
	return dm_message(dm, "mark_all", NULL, 0);
}

/*
 * Netlink: resolve the family, then dump the extents.
 */
static int family_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nlattr *attr;

	mnl_attr_for_each(attr, nlh, sizeof(struct genlmsghdr))
		if (mnl_attr_get_type(attr) == CTRL_ATTR_FAMILY_ID &&
		    mnl_attr_validate(attr, MNL_TYPE_U16) == 0)
			*(uint16_t *)data = mnl_attr_get_u16(attr);
	return MNL_CB_OK;
}

/*
 * The end of a dump carries its error, which libmnl's default handler
 * ignores: a dump cut short by a removed device must not look complete.
 */
static int done_cb(const struct nlmsghdr *nlh, void *data)
{
	int err;

	if (nlh->nlmsg_len >= mnl_nlmsg_size(sizeof(int))) {
		err = *(int *)mnl_nlmsg_get_payload(nlh);
		if (err < 0) {
			errno = -err;
			return MNL_CB_ERROR;
		}
	}
	return MNL_CB_STOP;
}

/* What libmnl does by default, which a control array replaces. */
static int error_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct nlmsgerr *err = mnl_nlmsg_get_payload(nlh);

	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*err))) {
		errno = EBADMSG;
		return MNL_CB_ERROR;
	}
	if (!err->error)
		return MNL_CB_STOP;	/* an acknowledgement */
	errno = err->error < 0 ? -err->error : err->error;
	return MNL_CB_ERROR;
}

static int noop_cb(const struct nlmsghdr *nlh, void *data)
{
	return MNL_CB_OK;
}

static int overrun_cb(const struct nlmsghdr *nlh, void *data)
{
	errno = ENOSPC;
	return MNL_CB_ERROR;
}

static mnl_cb_t ctl_cb[NLMSG_MIN_TYPE] = {
	[NLMSG_NOOP] = noop_cb,
	[NLMSG_ERROR] = error_cb,
	[NLMSG_DONE] = done_cb,
	[NLMSG_OVERRUN] = overrun_cb,
};

/* Run one request on NL and feed the replies to CB; -errno on failure. */
static int nl_talk(struct mnl_socket *nl, struct nlmsghdr *nlh, char *buf,
		   size_t len, mnl_cb_t cb, void *data)
{
	unsigned int portid = mnl_socket_get_portid(nl);
	unsigned int seq = nlh->nlmsg_seq;
	ssize_t n;
	int r;

	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	for (;;) {
		n = mnl_socket_recvfrom(nl, buf, len);
		if (n < 0)
			return -errno;
		errno = 0;
		r = mnl_cb_run2(buf, n, seq, portid, cb, data, ctl_cb,
				NLMSG_MIN_TYPE);
		if (r < 0)
			return errno ? -errno : -EPROTO;
		if (r == MNL_CB_STOP)
			return 0;
	}
}

struct extent_walk {
	track_extent_fn fn;
	void *arg;
	int result;
};

static int extents_cb(const struct nlmsghdr *nlh, void *data)
{
	struct extent_walk *w = data;
	struct nlattr *attr;

	mnl_attr_for_each(attr, nlh, sizeof(struct genlmsghdr)) {
		const struct dm_track_extent *ext;
		size_t i, n;

		if (mnl_attr_get_type(attr) != DM_TRACK_ATTR_EXTENTS)
			continue;
		ext = mnl_attr_get_payload(attr);
		n = mnl_attr_get_payload_len(attr) / sizeof(*ext);
		for (i = 0; i < n; i++) {
			w->result = w->fn(ext[i].first, ext[i].count, w->arg);
			if (w->result)
				return MNL_CB_STOP;
		}
	}
	return MNL_CB_OK;
}

TRACK_EXPORT int track_dm_for_each_extent(struct track_dm *dm,
					  enum track_dm_set set,
					  track_extent_fn fn, void *arg)
{
	struct extent_walk w = { .fn = fn, .arg = arg };
	size_t len = MNL_SOCKET_BUFFER_SIZE * 4;
	struct mnl_socket *nl;
	struct genlmsghdr *genl;
	struct nlmsghdr *nlh;
	uint16_t family = 0;
	char *buf;
	int r;

	if (set != TRACK_DM_ACTIVE && set != TRACK_DM_FROZEN)
		return -EINVAL;
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	nl = mnl_socket_open2(NETLINK_GENERIC, SOCK_CLOEXEC);
	if (!nl) {
		r = -errno;
		goto out_buf;
	}
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		r = -errno;
		goto out;
	}

	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = GENL_ID_CTRL;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = time(NULL);
	genl = mnl_nlmsg_put_extra_header(nlh, sizeof(*genl));
	genl->cmd = CTRL_CMD_GETFAMILY;
	genl->version = 1;
	mnl_attr_put_strz(nlh, CTRL_ATTR_FAMILY_NAME, DM_TRACK_GENL_NAME);
	r = nl_talk(nl, nlh, buf, len, family_cb, &family);
	if (r == -ENOENT || (!r && !family)) {
		/* No family: the module is not loaded, so no such device. */
		r = -ENODEV;
		goto out;
	}
	if (r)
		goto out;

	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = family;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = time(NULL) + 1;
	genl = mnl_nlmsg_put_extra_header(nlh, sizeof(*genl));
	genl->cmd = DM_TRACK_CMD_GET_EXTENTS;
	genl->version = DM_TRACK_GENL_VERSION;
	mnl_attr_put_strz(nlh, DM_TRACK_ATTR_DEV_NAME, dm->name);
	mnl_attr_put_u8(nlh, DM_TRACK_ATTR_SET, set == TRACK_DM_FROZEN ?
			DM_TRACK_SET_FROZEN : DM_TRACK_SET_ACTIVE);
	r = nl_talk(nl, nlh, buf, len, extents_cb, &w);
	if (!r)
		r = w.result;
out:
	mnl_socket_close(nl);
out_buf:
	free(buf);
	return r;
}
