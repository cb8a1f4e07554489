// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The receiver's rule for incremental streams.
 *
 * A stream cut from a frozen set of dm-track holds every block changed in
 * the epochs (base, new]. A replica that last applied epoch L may take it
 * if base <= L (nothing between L and the stream is missing; a stream that
 * starts earlier is a superset and harmless) and L < new (otherwise the
 * stream is older than the replica and would roll blocks back).
 */
#include <errno.h>

#include "internal.h"
#include "stream_format.h"

TRACK_EXPORT int track_stream_check_epoch(const struct track_stream_info *info,
					  const char *source_id,
					  uint64_t last_epoch)
{
	if (!info || !source_id)
		return -EINVAL;
	if (strncmp(info->source_id, source_id, TRACK_STREAM_ID_MAX + 1))
		return -EXDEV;
	if (info->flags & TRACK_STREAM_FULL)
		return 0;
	if (!info->new_epoch)
		return -ENOENT;
	if (info->base_epoch > last_epoch)
		return -ERANGE;
	if (info->new_epoch <= last_epoch)
		return -ESTALE;
	return 0;
}
