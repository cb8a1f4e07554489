// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The dm-track side of dmextract and dmsync: freeze, list, commit, abort.
 * This is the only file of the tools that calls track_dm_*.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dsync_dm.h"

int ds_epoch_freeze(const char *name, struct ds_epoch *e, char *msg,
		    size_t msglen)
{
	memset(e, 0, sizeof(*e));
	snprintf(msg, msglen, "%s: this build of libtrack has no dm-track "
		 "support yet; use --dirty FILE --device PATH", name);
	return -ENOSYS;
}

int ds_epoch_for_each(struct ds_epoch *e,
		      int (*fn)(uint64_t first, uint64_t count, void *arg),
		      void *arg, char *msg, size_t msglen)
{
	return -ENOSYS;
}

int ds_epoch_commit(struct ds_epoch *e)
{
	return -ENOSYS;
}

int ds_epoch_abort(struct ds_epoch *e)
{
	return -ENOSYS;
}

void ds_epoch_close(struct ds_epoch *e)
{
}
